"""The Helm chart as helm renders it: valid, least-privileged, secure by default.

Every value set in the chart's ci/ directory passes ``helm lint --strict`` and kubeconform
in strict mode (schemas of the pinned Kubernetes, SchedulingPolicy's from crds/); the
objects themselves are then checked for what the chart promises.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import re
from pathlib import Path

import chart_helpers as ch
import pytest
import yaml

import metricsched
from metricsched import config
from metricsched.edges import observe

# What the operator calls, rule by rule (runtime/operator.py, edges/binder.py). A new API
# call needs a new line here and in templates/clusterrole.yaml.
EXPECTED_CLUSTER_RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]},
    {
        "apiGroups": [""],
        "resources": ["persistentvolumeclaims", "persistentvolumes"],
        "verbs": ["list", "watch"],
    },
    {
        "apiGroups": ["storage.k8s.io"],
        "resources": ["storageclasses", "csinodes", "volumeattachments"],
        "verbs": ["list", "watch"],
    },
    # runtime/informers.py DEVICE_CLASSES: DRA-backed extended resources (v1.36 and later).
    {
        "apiGroups": ["resource.k8s.io"],
        "resources": ["deviceclasses"],
        "verbs": ["list", "watch"],
    },
    {
        "apiGroups": ["metricsched.io"],
        "resources": ["schedulingpolicies"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["metricsched.io"],
        "resources": ["schedulingpolicies/status"],
        "verbs": ["patch"],
    },
    # edges/metrics_api.py: NodeMetrics for metrics with source metricsServer.
    {"apiGroups": ["metrics.k8s.io"], "resources": ["nodes"], "verbs": ["get", "list"]},
    # edges/metrics_auth.py: secure /metrics (metrics.secure, on by default).
    {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
    {
        "apiGroups": ["authorization.k8s.io"],
        "resources": ["subjectaccessreviews"],
        "verbs": ["create"],
    },
]


def value_set_id(path: Path) -> str:
    return path.name.removesuffix("-values.yaml")


# --- validity --------------------------------------------------------------------------


@pytest.mark.parametrize("values", ch.VALUE_SETS, ids=value_set_id)
def test_every_value_set_passes_helm_lint_strict(values):
    out = ch.helm(
        "lint", "--strict", "--kube-version", ch.K8S_VERSION, "-f", str(values), str(ch.CHART)
    )
    assert "0 chart(s) failed" in out.stdout


@pytest.mark.parametrize("values", ch.VALUE_SETS, ids=value_set_id)
def test_every_value_set_renders_objects_kubeconform_accepts_in_strict_mode(values, kubeconform):
    text = ch.render_text(values=[values])
    out = kubeconform(text)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Invalid: 0, Errors: 0" in out.stdout


def test_kubeconform_rejects_an_unknown_field_in_a_rendered_object(kubeconform):
    deployment = ch.one(ch.render(), "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["securityContxt"] = {}
    out = kubeconform(yaml.safe_dump(deployment))
    assert out.returncode != 0
    assert "securityContxt" in out.stdout


def test_kubeconform_checks_policies_against_the_crd_schema(kubeconform):
    good = yaml.safe_load((ch.ROOT / "manifests" / "examples" / "latency-policy.yaml").read_text())
    assert kubeconform(yaml.safe_dump(good)).returncode == 0
    bad = json.loads(json.dumps(good))
    bad["spec"]["metrics"][0]["goal"] = "Sideways"
    out = kubeconform(yaml.safe_dump(bad))
    assert out.returncode != 0
    assert "Sideways" in out.stdout or "goal" in out.stdout


def test_the_chart_crds_are_identical_to_the_top_level_crds():
    top, chart = ch.ROOT / "crds", ch.CHART / "crds"
    comparison = filecmp.dircmp(top, chart)
    assert not comparison.left_only, f"missing from the chart: {comparison.left_only}"
    assert not comparison.right_only, f"only in the chart: {comparison.right_only}"
    for name in comparison.common_files:
        assert (top / name).read_bytes() == (chart / name).read_bytes(), f"{name} differs"


def test_the_app_version_is_the_package_version_and_the_default_image_tag():
    chart = yaml.safe_load((ch.CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == metricsched.__version__
    assert ch.container(ch.render())["image"] == f"metricsched:{metricsched.__version__}"


# --- values ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        "imagee.tag=1",  # unknown top-level key
        "image.digest=sha256:0",  # unknown nested key
        "prometheus.ca.file=/x",  # unknown key two levels down
        "defaultFallback=Nearest",  # not an enum value
        "logFormat=yaml",
        "prometheus.url=prometheus:9090",  # no scheme
        "refreshInterval=15",  # no unit
        "schedulerNames=null",
    ],
)
def test_values_outside_the_schema_are_refused(bad):
    assert "values don't meet the specifications of the schema" in ch.render_error(bad)


def test_the_schema_closes_every_object_it_describes():
    schema = json.loads((ch.CHART / "values.schema.json").read_text())

    def open_objects(node, path):
        if isinstance(node, dict):
            described = node.get("type") == "object" and "properties" in node
            if described and node.get("additionalProperties") is not False:
                yield path
            for key, child in node.items():
                yield from open_objects(child, f"{path}.{key}")
        elif isinstance(node, list):
            for i, child in enumerate(node):
                yield from open_objects(child, f"{path}[{i}]")

    assert list(open_objects(schema, "$")) == []


def test_every_value_is_documented_in_values_yaml():
    """helm-docs style: each leaf value has a `# --` comment, on itself or on an ancestor
    whose value it is part of (e.g. the keys of `resources`)."""
    undocumented, stack = [], []  # stack: (indent, documented) of the enclosing keys
    comment: list[str] = []
    for line in (ch.CHART / "values.yaml").read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            comment.append(stripped)
            continue
        match = re.match(r"^(\s*)(-\s+)?([A-Za-z][\w.]*):(.*)$", line)
        if not match or match.group(2):
            comment = []
            continue
        indent, key, rest = len(match.group(1)), match.group(3), match.group(4).strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        documented = any(c.startswith("# --") for c in comment) or any(d for _, d in stack)
        if rest and not documented:  # a leaf (a scalar, [] or {})
            undocumented.append(key)
        stack.append((indent, documented))
        comment = []
    assert undocumented == []


def test_a_ca_from_both_a_secret_and_a_config_map_is_refused():
    error = ch.render_error("prometheus.ca.secretName=a", "prometheus.ca.configMapName=b")
    assert "set secretName or configMapName, not both" in error


def test_equal_metrics_and_health_ports_are_refused():
    assert "must differ" in ch.render_error("metrics.port=9000", "health.port=9000")


def test_an_existing_service_account_must_be_named():
    assert "serviceAccount.name is required" in ch.render_error("serviceAccount.create=false")


# --- security --------------------------------------------------------------------------


def test_the_pod_runs_non_root_with_a_read_only_root_and_no_capabilities():
    objs = ch.render()
    pod = ch.one(objs, "Deployment")["spec"]["template"]["spec"]
    sc = ch.container(objs)["securityContext"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert sc["runAsNonRoot"] is True
    assert sc["runAsUser"] == 65532
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "privileged" not in sc


def test_the_only_writable_path_is_an_empty_dir_at_tmp():
    objs = ch.render()
    pod = ch.one(objs, "Deployment")["spec"]["template"]["spec"]
    mounts = {m["mountPath"]: m["name"] for m in ch.container(objs)["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts == {"/tmp": "tmp"}
    assert "emptyDir" in volumes["tmp"]


def test_resource_requests_are_set():
    requests = ch.container(ch.render())["resources"]["requests"]
    assert set(requests) == {"cpu", "memory"}


def test_only_the_pod_mounts_a_service_account_token():
    objs = ch.render()
    assert ch.one(objs, "ServiceAccount")["automountServiceAccountToken"] is False
    pod = ch.one(objs, "Deployment")["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is True
    assert pod["serviceAccountName"] == ch.one(objs, "ServiceAccount")["metadata"]["name"]


def test_the_bearer_token_is_a_mounted_file_and_never_an_environment_value():
    objs = ch.render(
        "prometheus.bearerTokenSecret.name=prom-reader", "prometheus.bearerTokenSecret.key=tok"
    )
    pod = ch.one(objs, "Deployment")["spec"]["template"]["spec"]
    c = ch.container(objs)
    (volume,) = [v for v in pod["volumes"] if "secret" in v]
    assert volume["secret"]["secretName"] == "prom-reader"
    assert volume["secret"]["items"] == [{"key": "tok", "path": "token"}]
    (mount,) = [m for m in c["volumeMounts"] if m["name"] == volume["name"]]
    assert mount["readOnly"] is True
    assert ch.env(objs)["METRICSCHED_PROMETHEUS_TOKEN_FILE"] == f"{mount['mountPath']}/token"
    for e in c["env"]:
        assert "secretKeyRef" not in (e.get("valueFrom") or {}), e
    assert "envFrom" not in c


@pytest.mark.parametrize("source", ["secret", "configMap"])
def test_the_ca_bundle_is_mounted_from_a_secret_or_a_config_map(source):
    key = "secretName" if source == "secret" else "configMapName"
    objs = ch.render(f"prometheus.ca.{key}=trust", "prometheus.ca.key=bundle.pem")
    pod = ch.one(objs, "Deployment")["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "prometheus-ca"]
    assert volume[source]["items"] == [{"key": "bundle.pem", "path": "ca.crt"}]
    (mount,) = [m for m in ch.container(objs)["volumeMounts"] if m["name"] == "prometheus-ca"]
    assert ch.env(objs)["METRICSCHED_PROMETHEUS_CA_FILE"] == f"{mount['mountPath']}/ca.crt"


def test_tls_verification_is_on_by_default():
    assert ch.env(ch.render())["METRICSCHED_PROMETHEUS_INSECURE_SKIP_VERIFY"] == "false"


# --- RBAC ------------------------------------------------------------------------------


@pytest.mark.parametrize("values", ch.VALUE_SETS, ids=value_set_id)
def test_no_rbac_rule_uses_a_wildcard(values):
    for obj in ch.render(values=[values]):
        for rule in obj.get("rules") or []:
            for field in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert "*" not in (rule.get(field) or []), (obj["kind"], rule)


def test_the_cluster_role_grants_exactly_what_the_operator_uses():
    role = ch.one(ch.render(), "ClusterRole", "metricsched")
    assert role["rules"] == EXPECTED_CLUSTER_RULES


def test_evictions_are_granted_only_when_rebalancing_may_evict():
    # runtime/rebalancer.py via edges/eviction.py: spec.rebalance with mode Evict.
    eviction = {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}
    default = ch.one(ch.render(), "ClusterRole", "metricsched")["rules"]
    allowed = ch.one(ch.render("rebalance.allowEvictions=true"), "ClusterRole", "metricsched")
    assert eviction not in default
    assert allowed["rules"] == [
        *EXPECTED_CLUSTER_RULES[:-2],
        eviction,
        *EXPECTED_CLUSTER_RULES[-2:],
    ]


def test_the_cluster_role_cannot_read_secrets_or_delete_anything():
    for rule in ch.one(ch.render(), "ClusterRole", "metricsched")["rules"]:
        assert "secrets" not in rule["resources"]
        assert not {"delete", "deletecollection", "escalate", "bind", "impersonate"} & set(
            rule["verbs"]
        )


def test_the_cluster_role_is_bound_to_the_release_service_account():
    objs = ch.render()
    binding = ch.one(objs, "ClusterRoleBinding", "metricsched")
    role = ch.one(objs, "ClusterRole", "metricsched")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "metricsched", "namespace": "metricsched"}
    ]


def test_the_lease_role_is_namespaced_and_limited_to_the_release_lease():
    objs = ch.render("replicaCount=2")
    role = ch.one(objs, "Role")
    lease = ch.env(objs)["METRICSCHED_LEADER_ELECTION_ID"]
    assert role["metadata"]["namespace"] == "metricsched"
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [lease],
            "verbs": ["get", "update"],
        },
    ]
    binding = ch.one(objs, "RoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }


def test_an_existing_service_account_gets_the_bindings():
    objs = ch.render("serviceAccount.create=false", "serviceAccount.name=platform-sched")
    assert "ServiceAccount" not in ch.kinds(objs)
    subject = ch.one(objs, "ClusterRoleBinding")["subjects"][0]
    assert subject["name"] == "platform-sched"
    pod = ch.one(objs, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "platform-sched"


# --- replicas and leader election ------------------------------------------------------


def test_one_replica_elects_by_default_and_is_recreated_on_upgrade():
    """Regression: the default ran unfenced; a replacement pod made while the old process
    still ran (dead kubelet, forced delete) bound pods beside it."""
    objs = ch.render()
    deployment = ch.one(objs, "Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    env = ch.env(objs)
    assert env["METRICSCHED_LEADER_ELECT"] == "true"
    assert env["METRICSCHED_LEADER_ELECTION_ID"] == "metricsched"
    assert "Role" in ch.kinds(objs)
    assert "RoleBinding" in ch.kinds(objs)


def test_one_replica_may_opt_out_of_leader_election():
    objs = ch.render("leaderElection.enabled=false")
    assert ch.env(objs)["METRICSCHED_LEADER_ELECT"] == "false"
    assert "Role" not in ch.kinds(objs)
    assert "RoleBinding" not in ch.kinds(objs)


def test_more_than_one_replica_switches_leader_election_on_and_rolls():
    objs = ch.render("replicaCount=3")
    deployment = ch.one(objs, "Deployment")
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    env = ch.env(objs)
    assert env["METRICSCHED_LEADER_ELECT"] == "true"
    assert env["METRICSCHED_LEADER_ELECTION_ID"] == "metricsched"
    assert env["POD_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}


def test_the_operator_knows_its_own_pod_to_report_failing_watches_on_it():
    env = ch.env(ch.render())
    assert env["POD_UID"] == {"fieldRef": {"fieldPath": "metadata.uid"}}
    assert env["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}


def test_more_than_one_replica_elects_even_when_election_is_switched_off():
    objs = ch.render("replicaCount=2", "leaderElection.enabled=false")
    assert ch.env(objs)["METRICSCHED_LEADER_ELECT"] == "true"
    assert "Role" in ch.kinds(objs)


def test_each_release_has_its_own_lease():
    a = ch.env(ch.render("replicaCount=2", "fullnameOverride=sched-a"))
    b = ch.env(ch.render("replicaCount=2", "fullnameOverride=sched-b"))
    assert a["METRICSCHED_LEADER_ELECTION_ID"] != b["METRICSCHED_LEADER_ELECTION_ID"]


# --- operator configuration ------------------------------------------------------------


def test_every_metricsched_variable_the_chart_sets_is_one_the_operator_reads():
    parser = argparse.ArgumentParser()
    config.add_run_arguments(parser)
    known = set(re.findall(r"METRICSCHED_[A-Z_]+", parser.format_help()))
    objs = ch.render(
        "replicaCount=2",
        "prometheus.bearerTokenSecret.name=t",
        "prometheus.ca.secretName=c",
    )
    chart_vars = {name for name in ch.env(objs) if name.startswith("METRICSCHED_")}
    assert chart_vars - known == set()
    assert len(chart_vars) >= 14


def test_values_become_the_operator_configuration():
    objs = ch.render(
        "schedulerNames={a,b}",
        "prometheus.url=https://prom.example:9091",
        "refreshInterval=30s",
        "defaultFallback=Wait",
        "logFormat=text",
        "extraArgs={--events-per-second=100}",
        "replicaCount=2",
        "fullnameOverride=sched-a",
    )
    env = ch.env(objs)
    assert env["METRICSCHED_SCHEDULER_NAMES"] == "a,b"
    assert env["METRICSCHED_PROMETHEUS_URL"] == "https://prom.example:9091"
    assert env["METRICSCHED_REFRESH_INTERVAL"] == "30s"
    assert env["METRICSCHED_DEFAULT_FALLBACK"] == "Wait"
    assert env["METRICSCHED_LOG_FORMAT"] == "text"
    assert ch.container(objs)["args"] == ["run", "--events-per-second=100"]
    # The operator itself parses these the same way.
    parsed = config.from_args(
        argparse.Namespace(), {k: v for k, v in env.items() if isinstance(v, str)}
    )
    assert parsed.scheduler_names == frozenset({"a", "b"})
    assert parsed.refresh_interval_s == 30
    assert parsed.log_format == "text"
    assert parsed.leader_elect is True
    assert parsed.leader_election_id == "sched-a"


def test_the_probes_call_healthz_and_readyz_on_the_health_port():
    objs = ch.render("health.port=9181")
    c = ch.container(objs)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports["health"] == 9181
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert ch.env(objs)["METRICSCHED_HEALTH_PORT"] == "9181"


def test_the_default_priority_class_is_system_cluster_critical_and_can_be_removed():
    pod = ch.one(ch.render(), "Deployment")["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    pod = ch.one(ch.render("priorityClassName="), "Deployment")["spec"]["template"]["spec"]
    assert "priorityClassName" not in pod


def test_pod_labels_cannot_break_the_selector():
    objs = ch.render("podLabels.app\\.kubernetes\\.io/name=other", "podLabels.team=a")
    deployment = ch.one(objs, "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert labels["team"] == "a"
    for key, value in deployment["spec"]["selector"]["matchLabels"].items():
        assert labels[key] == value


# --- optional extras -------------------------------------------------------------------


def test_the_extras_are_off_by_default():
    assert ch.kinds(ch.render()) == [
        "ClusterRole",
        "ClusterRole",  # the metrics reader: bound to no one unless metrics.readers says so
        "ClusterRoleBinding",
        "Deployment",
        "Role",  # the Lease: leader election is not an extra
        "RoleBinding",
        "Service",
        "ServiceAccount",
    ]


def test_the_service_exposes_the_metrics_port_of_the_operator_pods():
    objs = ch.render("metrics.port=9100")
    service = ch.one(objs, "Service")
    deployment = ch.one(objs, "Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["ports"] == [
        {
            "name": "metrics",
            "port": 9100,
            "targetPort": "metrics",
            "protocol": "TCP",
            "appProtocol": "https",
        }
    ]
    assert all(pod_labels[k] == v for k, v in service["spec"]["selector"].items())
    ports = {p["name"]: p["containerPort"] for p in ch.container(objs)["ports"]}
    assert ports["metrics"] == 9100


def test_the_service_monitor_scrapes_the_metrics_service():
    objs = ch.render("serviceMonitor.enabled=true", "serviceMonitor.labels.release=prom")
    monitor = ch.one(objs, "ServiceMonitor")
    service = ch.one(objs, "Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prom"
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert all(service["metadata"]["labels"][k] == v for k, v in selector.items())
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["metricsched"]}
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"]
    assert endpoint["path"] == "/metrics"


def test_the_pod_disruption_budget_selects_the_operator_pods():
    objs = ch.render("replicaCount=2", "podDisruptionBudget.enabled=true")
    pdb = ch.one(objs, "PodDisruptionBudget")
    labels = ch.one(objs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["maxUnavailable"] == 1
    assert all(labels[k] == v for k, v in pdb["spec"]["selector"]["matchLabels"].items())


def test_the_dashboard_charts_only_metrics_the_operator_exports():
    objs = ch.render("grafanaDashboard.enabled=true")
    configmap = ch.one(objs, "ConfigMap")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(configmap["data"]["metricsched.json"])
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {
        re.sub(r"_(bucket|sum|count)$", "", name)
        for expr in exprs
        for name in re.findall(r"\bmetricsched_\w+", expr)
    }
    exported = set(
        re.findall(r"^# TYPE (\S+) ", observe.Metrics().exposition().decode(), re.MULTILINE)
    )
    assert used - exported == set()
    for wanted in (
        "metricsched_schedule_attempts_total",
        "metricsched_scheduling_attempt_duration_seconds",
        "metricsched_pod_scheduling_duration_seconds",
        "metricsched_pending_pods",
        "metricsched_webhook_admissions_total",
        "metricsched_webhook_admission_duration_seconds",
        "metricsched_metric_age_seconds",
        "metricsched_fallback_decisions_total",
        "metricsched_prometheus_errors_total",
        "metricsched_leader",
        "metricsched_shadow_agreement_ratio",
        "metricsched_api_writes_total",
    ):
        assert wanted in used
    assert any("histogram_quantile(0.99" in e for e in exprs)
    assert any("histogram_quantile(0.5" in e for e in exprs)


# --- secure /metrics -------------------------------------------------------------------


def test_metrics_are_secure_by_default_and_readable_by_the_reader_role_only():
    objs = ch.render()
    assert ch.env(objs)["METRICSCHED_METRICS_SECURE"] == "true"
    assert "METRICSCHED_METRICS_CERT_DIR" not in ch.env(objs)  # self-signed
    reader = ch.one(objs, "ClusterRole", "metricsched-metrics-reader")
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    bindings = [m for m in objs if m["kind"] == "ClusterRoleBinding"]
    assert [b["roleRef"]["name"] for b in bindings] == ["metricsched"]


def test_plain_http_metrics_need_no_reviews_and_no_reader_role():
    objs = ch.render("metrics.secure=false")
    assert ch.env(objs)["METRICSCHED_METRICS_SECURE"] == "false"
    assert ch.one(objs, "ClusterRole", "metricsched")["rules"] == EXPECTED_CLUSTER_RULES[:-2]
    assert ch.kinds(objs).count("ClusterRole") == 1


def test_readers_are_bound_to_the_metrics_reader_role():
    objs = ch.render(
        "metrics.readers[0].kind=ServiceAccount",
        "metrics.readers[0].name=prometheus-k8s",
        "metrics.readers[0].namespace=monitoring",
        "metrics.readers[1].kind=Group",
        "metrics.readers[1].name=sre",
    )
    binding = ch.one(objs, "ClusterRoleBinding", "metricsched-metrics-reader")
    assert binding["roleRef"]["name"] == "metricsched-metrics-reader"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"},
        {"kind": "Group", "name": "sre", "apiGroup": "rbac.authorization.k8s.io"},
    ]


def test_a_certificate_secret_is_mounted_where_the_operator_reads_it():
    objs = ch.render("metrics.certSecret=metrics-tls", "serviceMonitor.enabled=true")
    env = ch.env(objs)
    mounts = {m["name"]: m for m in ch.container(objs)["volumeMounts"]}
    assert mounts["metrics-cert"]["mountPath"] == env["METRICSCHED_METRICS_CERT_DIR"]
    assert mounts["metrics-cert"]["readOnly"] is True
    volumes = ch.one(objs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    (volume,) = [v for v in volumes if v["name"] == "metrics-cert"]
    assert volume["secret"]["secretName"] == "metrics-tls"
    (endpoint,) = ch.one(objs, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["tlsConfig"]["ca"] == {"secret": {"name": "metrics-tls", "key": "ca.crt"}}
    assert endpoint["tlsConfig"]["serverName"] == "metricsched-metrics.metricsched.svc"


def test_the_service_monitor_scrapes_https_with_its_token_when_metrics_are_secure():
    (endpoint,) = ch.one(ch.render("serviceMonitor.enabled=true"), "ServiceMonitor")["spec"][
        "endpoints"
    ]
    assert endpoint["scheme"] == "https"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}
    objs = ch.render("serviceMonitor.enabled=true", "metrics.secure=false")
    (endpoint,) = ch.one(objs, "ServiceMonitor")["spec"]["endpoints"]
    assert "scheme" not in endpoint and "bearerTokenFile" not in endpoint


def test_the_network_policy_admits_the_metrics_port_only():
    objs = ch.render(
        "networkPolicy.enabled=true",
        "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=monitoring",
    )
    policy = ch.one(objs, "NetworkPolicy")
    labels = ch.one(objs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert all(labels[k] == v for k, v in policy["spec"]["podSelector"]["matchLabels"].items())
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"port": "metrics", "protocol": "TCP"}]
    assert rule["from"] == [{"namespaceSelector": {"matchLabels": {"team": "monitoring"}}}]


# --- API Priority and Fairness ------------------------------------------------------------


def test_flow_schemas_put_the_lease_and_the_bindings_above_workload_low():
    """Issue 24, finding 12: without them the Lease renewals and Bindings sat in
    workload-low with every ServiceAccount, where a busy API server delays a renewal past
    the fence."""
    objs = ch.render("flowSchema.enabled=true")
    account = {
        "kind": "ServiceAccount",
        "serviceAccount": {"name": "metricsched", "namespace": "metricsched"},
    }
    lease = ch.one(objs, "FlowSchema", "metricsched-leader-election")["spec"]
    assert lease["priorityLevelConfiguration"] == {"name": "leader-election"}
    assert lease["rules"] == [
        {
            "subjects": [account],
            "resourceRules": [
                {
                    "verbs": ["get", "create", "update"],
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "namespaces": ["metricsched"],
                }
            ],
        }
    ]
    binding = ch.one(objs, "FlowSchema", "metricsched-binding")["spec"]
    assert binding["priorityLevelConfiguration"] == {"name": "workload-high"}
    (rule,) = binding["rules"]
    assert rule["subjects"] == [account]
    assert rule["resourceRules"] == [
        {"verbs": ["create"], "apiGroups": [""], "resources": ["pods/binding"], "namespaces": ["*"]}
    ]
    for spec in (lease, binding):
        assert spec["matchingPrecedence"] == 1000  # after the control plane's, before 9000
        assert spec["distinguisherMethod"] == {"type": "ByUser"}


def test_flow_schemas_are_opt_in_and_follow_the_service_account():
    assert "FlowSchema" not in ch.kinds(ch.render())
    objs = ch.render(
        "flowSchema.enabled=true", "serviceAccount.create=false", "serviceAccount.name=sched"
    )
    for fs in (m for m in objs if m["kind"] == "FlowSchema"):
        (rule,) = fs["spec"]["rules"]
        assert rule["subjects"][0]["serviceAccount"]["name"] == "sched"
    without_election = ch.render("flowSchema.enabled=true", "leaderElection.enabled=false")
    names = [m["metadata"]["name"] for m in without_election if m["kind"] == "FlowSchema"]
    assert names == ["metricsched-binding"]
