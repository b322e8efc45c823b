#!/usr/bin/env bash
# Lints the Helm chart and validates what it renders, offline, with the pinned tools:
#   1. helm lint --strict, once per value set in the chart's ci/*-values.yaml;
#   2. helm template with each value set, piped into kubeconform -strict against schemas
#      made by hack/kubeconform-schemas.py: the built-in kinds from the pinned Kubernetes
#      (v1.35.4) OpenAPI document, SchedulingPolicy from crds/;
#   3. kubeconform -strict over crds/ and manifests/examples/ (the examples' policies are
#      checked against the CRD's own schema).
# ServiceMonitor and PrometheusRule (monitoring.coreos.com/v1) are skipped by kubeconform:
# their schemas belong to prometheus-operator, which this repository neither ships nor can
# download here; tests/unit/chart checks the rendered ServiceMonitor's shape, and promtool
# the PrometheusRule's alerts (tests/unit/chart/test_alert_rules.py), instead.
# cert-manager's Certificate and Issuer (webhook.certManager) are skipped for the same
# reason; the chart tests check their shape.
#
#   hack/helm-lint.sh            (make helm-lint runs it after make tools)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$("$root/hack/build-tools.sh" --print)
helm=$bin/helm
kubeconform=$bin/kubeconform
python=${PYTHON:-$root/.venv/bin/python}
chart=$root/manifests/chart/metricsched
k8s_version=1.35.4

for tool in "$helm" "$kubeconform"; do
  [ -x "$tool" ] || { echo "error: $tool is missing; run make tools" >&2; exit 1; }
done

schemas=$(mktemp -d)
trap 'rm -rf "$schemas"' EXIT
"$python" "$root/hack/kubeconform-schemas.py" "$schemas" "$root"/crds/*.yaml
conform=("$kubeconform" -strict -summary -kubernetes-version "$k8s_version"
  -schema-location "$schemas/{{ .ResourceKind }}{{ .KindSuffix }}.json" -skip ServiceMonitor,PrometheusRule,Certificate,Issuer)

if ! diff -r "$root/crds" "$chart/crds" >/dev/null; then
  echo "error: $chart/crds differs from crds/ (the one source); copy crds/ over it" >&2
  exit 1
fi

for values in "$chart"/ci/*-values.yaml; do
  name=$(basename "$values")
  echo "== $name"
  "$helm" lint --strict --kube-version "$k8s_version" -f "$values" "$chart"
  "$helm" template metricsched "$chart" --namespace metricsched \
    --kube-version "$k8s_version" -f "$values" | "${conform[@]}" -
done

echo "== crds/ and manifests/examples/"
"${conform[@]}" "$root/crds" "$root/manifests/examples"
