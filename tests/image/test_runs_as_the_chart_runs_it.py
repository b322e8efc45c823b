"""The image run as the chart runs it: read-only root, uid 65532, no capabilities, no
privilege escalation, a writable /tmp only."""

from __future__ import annotations

import metricsched
from tests.image.conftest import AS_THE_CHART_RUNS_IT, run_image


def test_version_prints_the_package_version(image: str) -> None:
    out = run_image("version")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"metricsched {metricsched.__version__}"


def test_run_without_cluster_credentials_fails_with_one_line_and_no_traceback(image: str) -> None:
    out = run_image("run")
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("metricsched: cannot load cluster credentials")
    assert "Traceback" not in out.stderr


def test_the_default_command_is_run(image: str) -> None:
    out = run_image()
    assert out.returncode == 1
    assert "cannot load cluster credentials" in out.stderr


def test_the_image_runs_as_uid_65532_without_being_told(image: str) -> None:
    options = [o for o in AS_THE_CHART_RUNS_IT if not o.startswith("--user")]
    out = run_image(
        "-c", "import os; print(os.getuid(), os.getgid())", options=options, entrypoint="python3"
    )
    assert out.stdout.split() == ["65532", "65532"], out.stderr


def test_only_tmp_is_writable_and_no_capability_is_held(image: str) -> None:
    script = (
        "import os\n"
        "for path in ('/tmp/x', '/opt/metricsched/x', '/etc/x', '/x'):\n"
        "    try:\n"
        "        open(path, 'w').close(); print(path, 'writable')\n"
        "    except OSError:\n"
        "        print(path, 'read-only')\n"
        "status = open('/proc/self/status').read().splitlines()\n"
        "print([l.split()[1] for l in status if l.startswith(('CapEff', 'NoNewPrivs'))])\n"
    )
    out = run_image("-c", script, entrypoint="python3")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:4] == [
        "/tmp/x writable",
        "/opt/metricsched/x read-only",
        "/etc/x read-only",
        "/x read-only",
    ]
    assert lines[4] == "['0000000000000000', '1']"


def test_the_operator_imports_everything_it_needs_in_the_pruned_image(image: str) -> None:
    # The build removes tests, compiled caches and kubernetes.aio from the dependencies.
    script = (
        "import metricsched.cli, metricsched.runtime.operator, metricsched.edges.metrics_auth\n"
        "import kopf, kubernetes, prometheus_api_client, yaml, aiohttp\n"
        "print('ok')"
    )
    out = run_image("-c", script, entrypoint="python3")
    assert out.stdout.strip() == "ok", out.stderr
