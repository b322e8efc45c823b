"""One identity per replica: a ServiceAccount, RBAC as the Helm chart grants, a token.

The audit log names the user of every request; giving each replica its own ServiceAccount
is what lets the checker say which replica made a Binding. The rules are the chart's
ClusterRole (manifests/chart/metricsched/templates/clusterrole.yaml) and its leader
election Role, so a replica here can do exactly what an installed one can. Each replica's
kubeconfig points at its own fault proxy, not at the API server.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import kubernetes
import yaml

CLUSTER_ROLE = "metricsched-faults"

# The chart's ClusterRole, rule for rule.
CHART_CLUSTER_ROLE = (
    Path(__file__).resolve().parents[2] / "manifests/chart/metricsched/templates/clusterrole.yaml"
)


def chart_rules() -> list[dict[str, Any]]:
    """The chart's ClusterRole rules, read from its template (one source: a rule the
    operator needs is added there and the replicas get it too). The optional rules of
    secure /metrics, inside a template conditional, are left out: replicas serve plain
    /metrics."""
    text = CHART_CLUSTER_ROLE.read_text()
    body = text.split("\nrules:\n", 1)[1].split("{{-", 1)[0]
    rules = yaml.safe_load("rules:\n" + body)["rules"]
    assert isinstance(rules, list) and rules, "no rules in the chart's ClusterRole"
    return rules


RULES: list[dict[str, Any]] = chart_rules()


def _apply(create: Any, replace: Any, name: str, body: dict[str, Any], *ns: str) -> None:
    try:
        create(*ns, body)
    except kubernetes.client.exceptions.ApiException as e:
        if e.status != 409:
            raise
        replace(name, *ns, body)


def ensure_cluster_role(api_client: Any) -> None:
    rbac = kubernetes.client.RbacAuthorizationV1Api(api_client)
    body = {"metadata": {"name": CLUSTER_ROLE}, "rules": RULES}
    _apply(rbac.create_cluster_role, rbac.replace_cluster_role, CLUSTER_ROLE, body)


def user_of(namespace: str, account: str) -> str:
    """The audit log's user.username for a ServiceAccount."""
    return f"system:serviceaccount:{namespace}:{account}"


def create_replica_identity(
    api_client: Any, *, namespace: str, account: str, lease_name: str
) -> str:
    """ServiceAccount + bindings in ``namespace``; returns a one-hour token for it."""
    core: Any = kubernetes.client.CoreV1Api(api_client)
    rbac: Any = kubernetes.client.RbacAuthorizationV1Api(api_client)
    try:
        core.create_namespaced_service_account(namespace, {"metadata": {"name": account}})
    except kubernetes.client.exceptions.ApiException as e:
        if e.status != 409:
            raise
    subject = [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]
    crb = f"{CLUSTER_ROLE}-{namespace}-{account}"
    _apply(
        rbac.create_cluster_role_binding,
        rbac.replace_cluster_role_binding,
        crb,
        {
            "metadata": {"name": crb, "labels": {"metricsched.io/faults": namespace}},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": CLUSTER_ROLE,
            },
            "subjects": subject,
        },
    )
    # The chart's leader-election Role: create any Lease, read and renew only ours.
    role = f"{account}-leader-election"
    _apply(
        rbac.create_namespaced_role,
        rbac.replace_namespaced_role,
        role,
        {
            "metadata": {"name": role},
            "rules": [
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "verbs": ["create"],
                },
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "resourceNames": [lease_name],
                    "verbs": ["get", "update", "patch"],
                },
            ],
        },
        namespace,
    )
    _apply(
        rbac.create_namespaced_role_binding,
        rbac.replace_namespaced_role_binding,
        role,
        {
            "metadata": {"name": role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": subject,
        },
        namespace,
    )
    token = core.create_namespaced_service_account_token(
        account, namespace, {"spec": {"expirationSeconds": 3600}}
    )
    return str(token.status.token)


def delete_cluster_bindings(api_client: Any, namespace: str) -> None:
    """The cluster-scoped bindings a scenario made (namespaced objects go with it)."""
    rbac = kubernetes.client.RbacAuthorizationV1Api(api_client)
    rbac.delete_collection_cluster_role_binding(label_selector=f"metricsched.io/faults={namespace}")


def write_kubeconfig(
    path: Path, *, server: str, ca_file: str, token: str, embed_ca: bool = True
) -> Path:
    """A replica's kubeconfig. ``embed_ca``: the CA's bytes in the file (read once); else
    the CA file's path, read from disk as a pod's projected service-account CA is."""
    ca: dict[str, str] = (
        {"certificate-authority-data": base64.b64encode(Path(ca_file).read_bytes()).decode()}
        if embed_ca
        else {"certificate-authority": ca_file}
    )
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "faults", "cluster": {"server": server, **ca}}],
        "users": [{"name": "replica", "user": {"token": token}}],
        "contexts": [{"name": "faults", "context": {"cluster": "faults", "user": "replica"}}],
        "current-context": "faults",
    }
    path.write_text(json.dumps(cfg, indent=2))
    path.chmod(0o600)
    return path
