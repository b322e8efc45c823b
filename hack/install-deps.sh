#!/usr/bin/env bash
# Installs the system packages the local control plane needs, only when missing:
# Prometheus (Debian's package) and openssl. Needs root (or sudo) and Debian's apt.
set -euo pipefail
need=()
command -v prometheus >/dev/null 2>&1 || [ -x /usr/bin/prometheus ] || need+=(prometheus)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v ss >/dev/null 2>&1 || need+=(iproute2)
[ ${#need[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "error: missing ${need[*]}; install them with your package manager" >&2
  exit 1
fi
echo "installing ${need[*]} (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q >/dev/null
# The Debian package would start a system Prometheus on :9090 where an init system runs;
# policy-rc.d keeps it from starting: the cluster runs its own on loopback.
$sudo apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
