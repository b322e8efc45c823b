"""Prometheus credentials as flags and METRICSCHED_* variables: headers, basic auth and a
client certificate; combinations that cannot work are refused at start-up."""

from __future__ import annotations

import argparse

import pytest

from metricsched import config as config_mod
from metricsched.edges import prometheus


def _parse(argv: list[str], env: dict[str, str] | None = None) -> config_mod.Config:
    parser = argparse.ArgumentParser()
    config_mod.add_run_arguments(parser)
    return config_mod.from_args(parser.parse_args(argv), env or {})


def test_no_extra_credentials_by_default() -> None:
    cfg = _parse([])
    assert cfg.prometheus_headers == ()
    assert cfg.prometheus_username is None
    assert cfg.prometheus_password_file is None
    assert cfg.prometheus_cert_file is None
    assert cfg.prometheus_key_file is None


def test_flags_set_headers_basic_auth_and_a_client_certificate() -> None:
    cfg = _parse(
        [
            "--prometheus-url=https://mimir.example:8080/prometheus",
            "--prometheus-header=X-Scope-OrgID=team-a",
            "--prometheus-header",
            "X-Extra = 1",
            "--prometheus-username=reader",
            "--prometheus-password-file=/etc/p/password",
            "--prometheus-cert-file=/etc/c/tls.crt",
            "--prometheus-key-file=/etc/c/tls.key",
        ]
    )
    assert cfg.prometheus_headers == (("X-Scope-OrgID", "team-a"), ("X-Extra", "1"))
    assert (cfg.prometheus_username, cfg.prometheus_password_file) == ("reader", "/etc/p/password")
    assert (cfg.prometheus_cert_file, cfg.prometheus_key_file) == (
        "/etc/c/tls.crt",
        "/etc/c/tls.key",
    )
    source_config = prometheus.PrometheusConfig.from_config(cfg)
    assert source_config.headers == cfg.prometheus_headers
    assert source_config.username == "reader"
    assert source_config.cert_file == "/etc/c/tls.crt"


def test_environment_variables_are_the_flags_equivalents() -> None:
    cfg = _parse(
        [],
        {
            "METRICSCHED_PROMETHEUS_URL": "https://thanos.example:9091",
            "METRICSCHED_PROMETHEUS_HEADERS": "X-Scope-OrgID=team-a|team-b,X-Extra=1",
            "METRICSCHED_PROMETHEUS_USERNAME": "reader",
            "METRICSCHED_PROMETHEUS_PASSWORD_FILE": "/etc/p/password",
            "METRICSCHED_PROMETHEUS_CERT_FILE": "/etc/c/tls.crt",
            "METRICSCHED_PROMETHEUS_KEY_FILE": "/etc/c/tls.key",
        },
    )
    assert cfg.prometheus_headers == (("X-Scope-OrgID", "team-a|team-b"), ("X-Extra", "1"))
    assert cfg.prometheus_username == "reader"
    assert cfg.prometheus_key_file == "/etc/c/tls.key"


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--prometheus-header=X-Scope-OrgID"], "not NAME=VALUE"),
        (["--prometheus-header=Bad Name=x"], "not NAME=VALUE"),
        (["--prometheus-header=Authorization=Bearer abc"], "carries credentials"),
        (["--prometheus-username=reader"], "both a Prometheus username and a password file"),
        (["--prometheus-password-file=/p"], "both a Prometheus username and a password file"),
        (
            [
                "--prometheus-username=a",
                "--prometheus-password-file=/p",
                "--prometheus-token-file=/t",
            ],
            "not both",
        ),
        (["--prometheus-username=a:b", "--prometheus-password-file=/p"], "cannot contain ':'"),
        (["--prometheus-header-file=X-Api-Key"], "not NAME=PATH"),
        (["--prometheus-header-file=X-Api-Key="], "not NAME=PATH"),
        (["--prometheus-header-file=Bad Name=/k"], "not NAME=PATH"),
        (
            ["--prometheus-token-file=/t", "--prometheus-header-file=Authorization=/k"],
            "set by the bearer token or basic auth",
        ),
        (
            ["--prometheus-header=X-Api-Key=1", "--prometheus-header-file=x-api-key=/k"],
            "given twice",
        ),
        (
            ["--prometheus-url=https://p:9091", "--prometheus-cert-file=/c"],
            "both a cert file and a key file",
        ),
        (
            ["--prometheus-cert-file=/c", "--prometheus-key-file=/k"],
            "needs an https:// Prometheus URL",
        ),
    ],
)
def test_combinations_that_cannot_work_are_refused(argv: list[str], error: str) -> None:
    with pytest.raises(config_mod.ConfigError, match=error):
        _parse(argv)


def test_a_refused_header_value_is_not_echoed() -> None:
    with pytest.raises(config_mod.ConfigError) as refused:
        _parse(["--prometheus-header=Authorization=Bearer s3cr3t"])
    assert "s3cr3t" not in str(refused.value)


def test_a_header_from_a_file_keeps_only_its_path_and_reaches_the_source() -> None:
    cfg = _parse(
        ["--prometheus-header-file=X-Api-Key=/etc/h/key"],
        {"METRICSCHED_PROMETHEUS_HEADER_FILES": "ignored=/x"},
    )
    assert cfg.prometheus_header_files == (("X-Api-Key", "/etc/h/key"),)
    assert prometheus.PrometheusConfig.from_config(cfg).header_files == (
        ("X-Api-Key", "/etc/h/key"),
    )
    from_env = _parse(
        [], {"METRICSCHED_PROMETHEUS_HEADER_FILES": "X-Api-Key=/etc/h/key,Authorization=/etc/a"}
    )
    # Without the token or basic auth, a secret Authorization scheme may come from a file.
    assert from_env.prometheus_header_files == (
        ("X-Api-Key", "/etc/h/key"),
        ("Authorization", "/etc/a"),
    )
