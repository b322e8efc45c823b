#!/usr/bin/env bash
# Installs what `make image` needs, only when missing: podman (builds and runs the image),
# runc (the OCI runtime: Debian's podman would pick crun, which refuses this kind of
# cgroup v1 "hybrid" host), skopeo (exports the oci-archive) and mmdebstrap (makes the
# Python base from Debian packages). buildah is not needed: `podman build` carries it.
# Needs root (or sudo) and Debian's apt; the Debian mirror is the only network used.
set -euo pipefail
need=()
command -v podman >/dev/null 2>&1 || need+=(podman)
command -v runc >/dev/null 2>&1 || need+=(runc)
command -v skopeo >/dev/null 2>&1 || need+=(skopeo)
command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)
# mmdebstrap verifies Debian's Release files with it (present on Debian, not on Ubuntu).
[ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || need+=(debian-archive-keyring)
[ ${#need[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "error: missing ${need[*]}; install them with your package manager" \
       "(or build with Docker: see the README's \"The operator image\")" >&2
  exit 1
fi
echo "installing ${need[*]} (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q >/dev/null
# No Recommends: they would pull crun, fuse-overlayfs and slirp4netns, none of which a
# root build with runc, native overlay and --network=none uses.
$sudo apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
