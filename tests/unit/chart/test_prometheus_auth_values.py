"""Prometheus credentials in chart values: headers, basic auth and a client certificate
reach the operator as it reads them; secrets arrive as mounted files, never as values."""

from __future__ import annotations

import argparse

import chart_helpers as ch
import pytest

from metricsched import config

VALUES = ch.CHART / "ci" / "prometheus-basic-auth-values.yaml"


def test_none_of_them_is_set_by_default() -> None:
    env = ch.env(ch.render())
    for name in ("HEADERS", "USERNAME", "PASSWORD_FILE", "CERT_FILE", "KEY_FILE"):
        assert f"METRICSCHED_PROMETHEUS_{name}" not in env


def test_headers_basic_auth_and_a_client_certificate_reach_the_operator() -> None:
    objs = ch.render("prometheus.headers.X-Extra=b", values=[VALUES])
    env = ch.env(objs)
    parsed = config.from_args(
        argparse.Namespace(), {k: v for k, v in env.items() if isinstance(v, str)}
    )
    assert parsed.prometheus_headers == (("X-Extra", "b"), ("X-Scope-OrgID", "team-a"))
    assert parsed.prometheus_username == "metricsched"
    mounts = {m["name"]: m for m in ch.container(objs)["volumeMounts"]}
    volumes = {
        v["name"]: v for v in ch.one(objs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    }
    password = mounts["prometheus-password"]
    assert parsed.prometheus_password_file == f"{password['mountPath']}/password"
    assert password["readOnly"] is True
    assert volumes["prometheus-password"]["secret"] == {
        "secretName": "mimir-reader",
        "defaultMode": 0o440,
        "items": [{"key": "password", "path": "password"}],
    }
    cert = mounts["prometheus-client-cert"]
    assert parsed.prometheus_cert_file == f"{cert['mountPath']}/tls.crt"
    assert parsed.prometheus_key_file == f"{cert['mountPath']}/tls.key"
    assert volumes["prometheus-client-cert"]["secret"]["secretName"] == "metricsched-client-tls"


def test_a_header_from_a_secret_is_a_mounted_file_the_operator_reads() -> None:
    objs = ch.render(
        "prometheus.headerSecrets[0].header=X-Api-Key",
        "prometheus.headerSecrets[0].secretName=prom-key",
        "prometheus.headerSecrets[0].key=api-key",
        "prometheus.headerSecrets[1].header=X-Org-Token",
        "prometheus.headerSecrets[1].secretName=org-token",
    )
    env = ch.env(objs)
    parsed = config.from_args(
        argparse.Namespace(), {k: v for k, v in env.items() if isinstance(v, str)}
    )
    mounts = {m["name"]: m for m in ch.container(objs)["volumeMounts"]}
    volumes = {
        v["name"]: v for v in ch.one(objs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    }
    assert parsed.prometheus_header_files == (
        ("X-Api-Key", f"{mounts['prometheus-header-0']['mountPath']}/value"),
        ("X-Org-Token", f"{mounts['prometheus-header-1']['mountPath']}/value"),
    )
    assert mounts["prometheus-header-0"]["readOnly"] is True
    assert volumes["prometheus-header-0"]["secret"] == {
        "secretName": "prom-key",
        "defaultMode": 0o440,
        "items": [{"key": "api-key", "path": "value"}],
    }
    assert volumes["prometheus-header-1"]["secret"]["items"] == [{"key": "value", "path": "value"}]
    assert "prom-key" not in str(env)


def test_no_secret_is_an_environment_value() -> None:
    env = ch.env(ch.render(values=[VALUES]))
    assert "mimir-reader" not in str(env)
    assert all("PASSWORD" not in name or name.endswith("_FILE") for name in env)


@pytest.mark.parametrize(
    ("sets", "error"),
    [
        (
            [
                "prometheus.bearerTokenSecret.name=t",
                "prometheus.headerSecrets[0].header=Authorization",
                "prometheus.headerSecrets[0].secretName=s",
            ],
            "set by bearerTokenSecret or basicAuth already",
        ),
        (
            [
                "prometheus.headers.X-Api-Key=plain",
                "prometheus.headerSecrets[0].header=X-Api-Key",
                "prometheus.headerSecrets[0].secretName=s",
            ],
            "in prometheus.headers too",
        ),
        (
            [
                "prometheus.bearerTokenSecret.name=t",
                "prometheus.basicAuth.username=u",
                "prometheus.basicAuth.passwordSecret.name=p",
            ],
            "set bearerTokenSecret or basicAuth, not both",
        ),
        (["prometheus.basicAuth.username=u"], "set both username and passwordSecret.name"),
        (["prometheus.basicAuth.passwordSecret.name=p"], "set both username"),
        (["prometheus.headers.Authorization=x"], "carries credentials"),
        (["prometheus.clientCert.secretName=c"], "needs an https:// prometheus.url"),
    ],
)
def test_credentials_that_cannot_work_are_refused(sets: list[str], error: str) -> None:
    assert error in ch.render_error(*sets)


@pytest.mark.parametrize(
    "bad",
    [
        "prometheus.headers.X-Scope-OrgID=a\\,b",  # the variable is comma-separated
        "prometheus.headers.Bad_Name=x",
        "prometheus.basicAuth.username=a:b",
        "prometheus.clientCert.key=tls.key",
    ],
)
def test_auth_values_outside_the_schema_are_refused(bad: str) -> None:
    assert "values don't meet the specifications of the schema" in ch.render_error(bad)
