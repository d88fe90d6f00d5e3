#!/usr/bin/env bash
# Installs the Debian packages a k1m target needs, only those missing.
# usage: hack/install-deps.sh build|cluster|...
# Thin glue: the package lists are here, or (what k1m's nodes run with) in
# build/debian/packages.env, so a fresh machine needs nothing else.
set -euo pipefail
# shellcheck source=build/debian/packages.env
source "$(dirname "$0")/../build/debian/packages.env"

declare -A PACKAGES=(
  # Building: GNU patch applies the series; git stamps the version.
  [build]="patch git ca-certificates"
  # Running a cluster: what k1m runs with (the container runtime the agent
  # starts and configures, CNI plugins, the packet filters kube-proxy
  # programs) and what the local clusters and tests use.
  [cluster]=$CLUSTER_PACKAGES
  # Conformance: debootstrap makes the Debian root of the e2e test images
  # (apache2, nginx, dnsutils, ... come from the Debian mirror through it);
  # bash-static is the busybox test image's sh (docs/conformance.md).
  [conformance]="debootstrap bash-static"
  # kind: a Docker engine to run kind's node containers (hack/docker.sh
  # starts dockerd when none runs); debootstrap (above) makes the base image.
  [kind]="docker.io"
)

need=()
for group in "$@"; do
  list=${PACKAGES[$group]:-}
  if [[ -z $list ]]; then
    echo "install-deps: unknown group '$group' (known: ${!PACKAGES[*]})" >&2
    exit 2
  fi
  for pkg in $list; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
  done
done
if ! command -v go >/dev/null; then
  echo "install-deps: Go is not installed; k1m builds with Go >= 1.24 (see docs/build.md)" >&2
  exit 1
fi
if ((${#need[@]} == 0)); then
  exit 0
fi
if [[ $(id -u) != 0 ]]; then
  echo "install-deps: missing packages ${need[*]}; run as root or install them with apt-get" >&2
  exit 1
fi
echo "install-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
