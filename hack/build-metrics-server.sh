#!/usr/bin/env bash
# Builds the pinned metrics-server (hack/go/metrics-server, sigs.k8s.io/metrics-server from
# the Go module proxy) and caches it outside the repository, beside the other tools:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/metricsched/metrics-server-<pins-hash>/
# with the binary and kwok's resource-metrics Metric (read from the pinned kwok module, as
# build-tools.sh reads kwok's stages), which makes kwok serve each node's
# /metrics/resource for metrics-server to scrape. Prints that directory on the last line.
#
# Apart from hack/build-tools.sh on purpose: that script's own text is part of its pins
# hash, so adding metrics-server there would rebuild every cached Kubernetes binary; and
# only the metricsServer source's e2e test needs this one.
#
#   hack/build-metrics-server.sh           build what is missing, print the directory
#   hack/build-metrics-server.sh --print   print the directory only (no build)
#   hack/build-metrics-server.sh --check   exit 0 if it is cached, else 1
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pins_hash() {
  (cd "$here" && cat build-metrics-server.sh go/metrics-server/go.{mod,sum} go/kwok/go.{mod,sum}) |
    sha256sum | cut -c1-12
}
dest=${XDG_CACHE_HOME:-$HOME/.cache}/metricsched/metrics-server-$(pins_hash)
log=$dest/build.log
ready() { [ -x "$dest/metrics-server" ] && [ -f "$dest/kwok-usage-from-annotation.yaml" ]; }

case "${1:-}" in
  --print) echo "$dest"; exit 0 ;;
  --check) ready; exit $? ;;
esac
if ready; then
  echo "$dest"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "error: the Go toolchain is missing; install Go >= 1.26 (https://go.dev/doc/install) and re-run" >&2
  exit 1
fi
mkdir -p "$dest"
: >"$log"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly
echo "building metrics-server into $dest (log: $log)" >&2
start=$(date +%s)
if ! (cd "$here/go/metrics-server" &&
  go build -trimpath -ldflags "-s -w" -o "$dest/.metrics-server.tmp" sigs.k8s.io/metrics-server/cmd/metrics-server) >>"$log" 2>&1; then
  rm -f "$dest/.metrics-server.tmp"
  echo "error: building metrics-server failed; see $log" >&2
  tail -n 20 "$log" >&2
  exit 1
fi
mv "$dest/.metrics-server.tmp" "$dest/metrics-server"
src=$(cd "$here/go/kwok" && go mod download sigs.k8s.io/kwok >>"$log" 2>&1 && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
cp "$src/kustomize/metrics/resource/metrics-resource.yaml" "$dest/kwok-metrics-resource.yaml"
cp "$src/kustomize/metrics/usage/usage-from-annotation.yaml" "$dest/kwok-usage-from-annotation.yaml"
chmod u+w "$dest"/kwok-*.yaml
echo "  metrics-server ok ($(($(date +%s) - start))s)" >&2
echo "$dest"
