"""`kubectl metricsched ...` and where explain and shadow take their settings from."""

from __future__ import annotations

import pathlib

import pytest

from metricsched import cli


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[str], str]]:
    seen: list[tuple[list[str], str]] = []

    def fake_main(argv, *, prog="metricsched"):
        seen.append((list(argv), prog))
        return 0

    monkeypatch.setattr(cli, "main", fake_main)
    return seen


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["explain", "shop/web"], ["explain", "shop/web"]),
        (
            ["--context", "prod", "--kubeconfig=/k", "shadow", "shop/trial"],
            ["shadow", "--context", "prod", "--kubeconfig=/k", "shop/trial"],
        ),
        (
            ["explain", "shop/web", "--context", "prod"],
            ["explain", "shop/web", "--context", "prod"],
        ),
        (["version"], ["version"]),
    ],
)
def test_kubectls_global_flags_reach_the_subcommand(calls, argv, expected):
    assert cli.kubectl_main(argv) == 0
    assert calls == [(expected, "kubectl metricsched")]


def test_the_plugin_is_installed_under_kubectls_name():
    setup = (pathlib.Path(__file__).resolve().parents[3] / "setup.cfg").read_text()
    assert "kubectl-metricsched = metricsched.cli:kubectl_main" in setup


@pytest.fixture
def dev_cluster(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / ".cluster").mkdir()
    (tmp_path / ".cluster" / "env").write_text(
        "export KUBECONFIG=/dev/kubeconfig\n"
        "export PROMETHEUS_URL=http://127.0.0.1:52090\n"
        'export PATH="/bin:$PATH"\n'
    )
    return tmp_path


def test_the_local_clusters_env_fills_what_nothing_else_sets(dev_cluster):
    defaults, source = cli.cluster_env_defaults({}, cwd=dev_cluster)
    assert defaults == {
        "METRICSCHED_KUBECONFIG": "/dev/kubeconfig",
        "METRICSCHED_PROMETHEUS_URL": "http://127.0.0.1:52090",
    }
    assert source == dev_cluster / ".cluster" / "env"


def test_metricsched_variables_and_kubeconfig_win_over_the_local_cluster(dev_cluster):
    env = {"METRICSCHED_PROMETHEUS_URL": "https://prom", "KUBECONFIG": "/home/me/.kube/config"}
    defaults, _ = cli.cluster_env_defaults(env, cwd=dev_cluster)
    assert defaults == {}


def test_without_a_local_cluster_nothing_is_filled(tmp_path):
    assert cli.cluster_env_defaults({}, cwd=tmp_path) == ({}, None)
