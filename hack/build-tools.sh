#!/usr/bin/env bash
# Builds the pinned control-plane binaries and tools from the Go modules under hack/go/
# and caches them outside the repository, under
#   ${XDG_CACHE_HOME:-$HOME/.cache}/metricsched/<kube version>-<pins-hash>/bin
# where <pins-hash> covers this script, the shared tool modules (etcd, kwok, helm,
# kubeconform) and that Kubernetes version's hack/go/k8s/<version> module. A binary that is
# already in the cache is not rebuilt. Prints the bin directory on the last line.
#
# The Kubernetes version (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
# and the parity oracle) is METRICSCHED_KUBE_VERSION, one of KUBE_VERSIONS below (each has
# hack/go/k8s/<version> and hack/go/oracle/<version>); unset, DEFAULT_KUBE_VERSION.
#
#   hack/build-tools.sh            build what is missing, print the bin dir
#   hack/build-tools.sh --print    print the bin dir only (no build)
#   hack/build-tools.sh --print-oracle   print where sched-oracle of these sources is (no build)
#   hack/build-tools.sh --oracle   build sched-oracle alone if missing, print where it is
#   hack/build-tools.sh --check    exit 0 if every binary is cached, else 1
#   hack/build-tools.sh --versions print the pinned Kubernetes versions, default first
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DEFAULT_KUBE_VERSION=v1.37.2
KUBE_VERSIONS="v1.37.2 v1.35.4"
K8S_VERSION=${METRICSCHED_KUBE_VERSION:-$DEFAULT_KUBE_VERSION}
HELM_VERSION=v3.21.4
KUBECONFORM_VERSION=v0.7.0

if [ "${1:-}" = --versions ]; then
  echo "$DEFAULT_KUBE_VERSION"
  for v in $KUBE_VERSIONS; do [ "$v" = "$DEFAULT_KUBE_VERSION" ] || echo "$v"; done
  exit 0
fi
case " $KUBE_VERSIONS " in
  *" $K8S_VERSION "*) ;;
  *)
    echo "error: METRICSCHED_KUBE_VERSION=$K8S_VERSION is not pinned here; pick one of: $KUBE_VERSIONS" >&2
    exit 2
    ;;
esac

pins_hash() {
  (cd "$here" && cat build-tools.sh go/{etcd,kwok,helm,kubeconform}/go.{mod,sum} \
    "go/k8s/$K8S_VERSION"/go.{mod,sum}) | sha256sum | cut -c1-12
}
# The oracle harness (go/oracle) is our own code on the same pins: a change to it rebuilds
# it alone, into a directory named by its source hash (worktrees with different harness
# sources share the cache without overwriting each other's binary), and leaves the pinned
# binaries be.
# Its main.go is shared by the versions; each hack/go/oracle/<version> module links it and
# adds what differs between the framework's versions (compat.go).
oracle_hash() {
  (cd "$here/go/oracle" && cat ./*.go "$K8S_VERSION"/compat.go "$K8S_VERSION"/go.{mod,sum}) |
    sha256sum | cut -c1-12
}
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/metricsched
dest=$cache_root/$K8S_VERSION-$(pins_hash)
bin=$dest/bin
log=$dest/build.log
oracle_dir=$dest/oracle-$(oracle_hash)

# name|module dir|package|ldflags
targets() {
  local kv=$K8S_VERSION minor
  minor=${kv#v1.}; minor=${minor%%.*}
  local k8sflags="-X k8s.io/component-base/version.gitVersion=$kv -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$kv -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
  local k8s=k8s/$K8S_VERSION oracle=oracle/$K8S_VERSION
  echo "kube-apiserver|$k8s|k8s.io/kubernetes/cmd/kube-apiserver|$k8sflags"
  echo "kube-controller-manager|$k8s|k8s.io/kubernetes/cmd/kube-controller-manager|$k8sflags"
  echo "kube-scheduler|$k8s|k8s.io/kubernetes/cmd/kube-scheduler|$k8sflags"
  echo "kubectl|$k8s|k8s.io/kubernetes/cmd/kubectl|$k8sflags"
  echo "sched-oracle|$oracle|metricsched.invalid/hack/oracle|$k8sflags"
  echo "etcd|etcd|go.etcd.io/etcd/server/v3|"
  echo "kwok|kwok|sigs.k8s.io/kwok/cmd/kwok|"
  echo "kwokctl|kwok|sigs.k8s.io/kwok/cmd/kwokctl|"
  echo "helm|helm|helm.sh/helm/v3/cmd/helm|-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$minor -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor"
  echo "kubeconform|kubeconform|github.com/yannh/kubeconform/cmd/kubeconform|-X main.version=$KUBECONFORM_VERSION"
}

missing() {
  local name
  while IFS='|' read -r name _; do
    [ -x "$bin/$name" ] || echo "$name"
  done < <(targets | grep -v '^sched-oracle|')
  [ -x "$oracle_dir/sched-oracle" ] || echo sched-oracle
  [ -f "$dest/kwok-stages/node-initialize.yaml" ] || echo kwok-stages
}

# kwok needs Stage objects to drive node and pod status; use the stock ones of the pinned
# kwok module (fast node init + lease heartbeat, fast pod lifecycle), read from the module
# cache rather than copied into this repository.
copy_kwok_stages() {
  local src
  src=$(cd "$here/go/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
  mkdir -p "$dest/kwok-stages"
  cp "$src"/kustomize/stage/node/fast/node-initialize.yaml \
     "$src"/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
     "$src"/kustomize/stage/pod/fast/pod-ready.yaml \
     "$src"/kustomize/stage/pod/fast/pod-complete.yaml \
     "$src"/kustomize/stage/pod/fast/pod-delete.yaml "$dest/kwok-stages/"
  chmod u+w "$dest"/kwok-stages/*.yaml
}

case "${1:-}" in
  --print) echo "$bin"; exit 0 ;;
  --print-oracle) echo "$oracle_dir/sched-oracle"; exit 0 ;;
  --check) [ -z "$(missing)" ]; exit $? ;;
esac

todo=$(missing)
result=$bin
if [ "${1:-}" = --oracle ]; then
  todo=$(grep -x sched-oracle <<<"$todo" || true)
  result=$oracle_dir/sched-oracle
fi
if [ -z "$todo" ]; then
  echo "$result"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "error: the Go toolchain is missing; install Go >= 1.26 (https://go.dev/doc/install) and re-run" >&2
  exit 1
fi
gov=$(go env GOVERSION | sed 's/^go//')
if [ "$(printf '%s\n1.26\n' "$gov" | sort -V | head -n1)" != "1.26" ]; then
  echo "error: Go $gov is too old; these modules need Go >= 1.26" >&2
  exit 1
fi

mkdir -p "$bin"
: >"$log"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly
echo "building into $bin (log: $log)" >&2
for name in $todo; do
  if [ "$name" = kwok-stages ]; then
    (cd "$here/go/kwok" && go mod download sigs.k8s.io/kwok) >>"$log" 2>&1
    copy_kwok_stages
    continue
  fi
  line=$(targets | grep "^$name|")
  IFS='|' read -r _ dir pkg flags <<<"$line"
  start=$(date +%s)
  printf '  %-24s ' "$name" >&2
  out=$bin
  [ "$name" != sched-oracle ] || out=$oracle_dir
  mkdir -p "$out"
  tmp="$out/.$name.tmp"
  if ! (cd "$here/go/$dir" && go build -trimpath -ldflags "-s -w $flags" -o "$tmp" "$pkg") >>"$log" 2>&1; then
    rm -f "$tmp"
    echo "FAILED" >&2
    echo "error: building $name failed; see $log" >&2
    tail -n 20 "$log" >&2
    exit 1
  fi
  mv "$tmp" "$out/$name"
  echo "ok ($(($(date +%s) - start))s)" >&2
done
echo "$result"
