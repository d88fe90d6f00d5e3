#!/usr/bin/env bash
# Installs k1m on this machine as a systemd service, like k3s's installer:
# the binary, the image archives, the runtime packages, a config file, a
# unit for the server or the agent role, and /usr/local/bin/k1m-uninstall.sh.
#
# It runs from either of
#   - a release directory (make release): k1m, images/*.tar and
#     sha256sum.txt next to this script; every file is checked against
#     sha256sum.txt before anything is installed. Needs no Go, make or
#     source tree.
#   - a checkout, as hack/install.sh, after `make build images` (or give
#     K1M_BIN and K1M_IMAGES).
#
# usage: install.sh server [k1m server flags...]
#        K1M_TOKEN=<server token> install.sh server --server https://[IPv6]:6443 [flags...]
#        K1M_TOKEN=<token> install.sh agent --server https://[IPv6]:6443 [flags...]
#        k1m-uninstall.sh   (written by this script: removes everything again)
set -euo pipefail

# >>> RUNTIME_PACKAGES, the Debian packages k1m runs with: a checkout reads
# them from build/debian/packages.env; a release has no checkout, and
# hack/release.sh writes them, with what each is for, in place of these lines.
packages_env=$(dirname "${BASH_SOURCE[0]}")/../build/debian/packages.env
[[ -f $packages_env ]] || { echo "install: no $packages_env: run install.sh from a release (make release), or as hack/install.sh in a checkout" >&2; exit 1; }
# shellcheck source=build/debian/packages.env
source "$packages_env"
read -ra RUNTIME_PACKAGES <<<"$RUNTIME_PACKAGES"
# <<< RUNTIME_PACKAGES
UNINSTALL=/usr/local/bin/k1m-uninstall.sh

die() { echo "install: $*" >&2; exit 1; }

role=${1:-}
shift || true
case $role in
  server | agent) ;;
  *) echo "usage: install.sh server|agent [flags for k1m server|agent]" >&2; exit 2 ;;
esac
[[ $(id -u) == 0 ]] || die "run as root"
if [[ $role == agent && -z ${K1M_TOKEN:-} ]]; then
  echo "install: K1M_TOKEN is empty: set it to a join token (k1m token create on the server, or its /var/lib/k1m/server/token)" >&2
  exit 2
fi
# A server joins a cluster with --server (on the command line, or in the
# config file kept from an earlier install); unless its flags or that
# file give the token themselves, it reads it from --token-file.
joining=false token_flag=false
if [[ $role == server ]]; then
  for a in "$@"; do
    case $a in
      --server | --server=*) joining=true ;;
      --token | --token=* | --token-file | --token-file=*) token_flag=true ;;
    esac
  done
  grep -q '^server:' /etc/k1m/config.yaml 2>/dev/null && joining=true
  grep -qE '^token(-file)?:' /etc/k1m/config.yaml 2>/dev/null && token_flag=true
  if [[ -n ${K1M_TOKEN:-} ]] && ! $joining; then
    echo "install: K1M_TOKEN is not used: only a server joining a cluster (--server URL) reads a token; this one makes its own" >&2
  fi
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ -f $here/sha256sum.txt ]]; then
  # A release: check every file before touching the machine.
  bin=$here/k1m
  if ! report=$(cd "$here" && sha256sum --check --strict sha256sum.txt 2>&1); then
    bad=$(sed -n 's/: FAILED.*//p' <<<"$report" | paste -sd ' ' -)
    echo "$report" | grep -v ': OK$' >&2 || true
    die "checksum mismatch in $here: ${bad:-sha256sum.txt}: nothing installed (copy the release again)"
  fi
  unlisted=$(cd "$here" && comm -13 <(awk '{print $2}' sha256sum.txt | LC_ALL=C sort) \
    <(find . -type f ! -name sha256sum.txt -printf '%P\n' | LC_ALL=C sort) | paste -sd ' ' -)
  [[ -z $unlisted ]] || die "$here: $unlisted not in sha256sum.txt: nothing installed (remove it, or copy the release again)"
  images=$here/images
  echo "install: $here matches sha256sum.txt"
else
  # A checkout: hack/install.sh next to _output/.
  bin=${K1M_BIN:-$here/../_output/bin/k1m}
  images=${K1M_IMAGES:-$here/../_output/images}
fi
[[ -x $bin ]] || die "$bin missing: run make build (or set K1M_BIN)"
ls "$images"/*.tar >/dev/null 2>&1 || die "no image archives in $images: run make images (or set K1M_IMAGES)"

need=()
for pkg in "${RUNTIME_PACKAGES[@]}"; do
  [[ $(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null) == "install ok installed" ]] || need+=("$pkg")
done
if ((${#need[@]} > 0)); then
  echo "install: installing ${need[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; }; then
    die "apt-get could not install ${need[*]}: install these Debian bookworm packages (from a mirror or as .deb files), then run this again"
  fi
fi

install -m 0755 "$bin" /usr/local/bin/k1m
install -d -m 0755 /var/lib/k1m/images /etc/k1m
install -m 0644 "$images"/*.tar /var/lib/k1m/images/
[[ -f /etc/k1m/config.yaml ]] || echo "# k1m $role settings: keys are the flag names (k1m $role --help)" >/etc/k1m/config.yaml
# The kernel modules a node needs (k1m's preflight names anything still
# missing): loaded now and at every boot.
[[ ! -d /etc/modules-load.d ]] || printf '%s\n' overlay br_netfilter >/etc/modules-load.d/k1m.conf
modprobe overlay 2>/dev/null || true
modprobe br_netfilter 2>/dev/null || true
umask 077
[[ -f /etc/k1m/k1m.env ]] || : >/etc/k1m/k1m.env # the operator's environment, kept on a reinstall
if [[ $role == server ]]; then
  # Earlier installs kept a joining server's token here for good.
  sed -i '/^K1M_TOKEN=/d' /etc/k1m/k1m.env
fi
args=("$role")
if [[ $role == agent ]]; then
  # Read once at the join, deleted by the agent once the node has its own
  # certificate: no join credential stays on the machine.
  echo "$K1M_TOKEN" >/etc/k1m/join-token
  args+=(--token-file /etc/k1m/join-token)
elif $joining && ! $token_flag; then
  # The cluster's server token (a server's DATA-DIR/server-token), not on
  # the command line (ps shows argv to everyone): read at the first start,
  # deleted by the server once it has joined, after which it keeps the
  # token in its DATA-DIR/server-token alone and restarts without this
  # file. Given on every install of a joining server, so that one which
  # joined with an earlier install's K1M_TOKEN restarts without it too.
  [[ -z ${K1M_TOKEN:-} ]] || echo "$K1M_TOKEN" >/etc/k1m/server-join-token
  args+=(--token-file /etc/k1m/server-join-token)
fi
args+=("$@")
umask 022

unit=/etc/systemd/system/k1m-$role.service
cat >"$unit" <<UNIT
[Unit]
Description=k1m $role (Kubernetes 1.32 for very large clusters)
Wants=network-online.target
After=network-online.target

[Service]
Type=simple
EnvironmentFile=-/etc/k1m/k1m.env
ExecStart=/usr/local/bin/k1m ${args[*]}
KillMode=process
Delegate=yes
LimitNOFILE=1048576
Restart=always
RestartSec=5s

[Install]
WantedBy=multi-user.target
UNIT
chmod 0644 "$unit"

# The uninstaller, as k3s writes k3s-uninstall.sh: the service stopped,
# everything k1m started killed (k1m cleanup: pods, containerd shims, the
# containerd k1m runs, mounts, pod network namespaces, the CNI bridge,
# kube-proxy's rules), then every file and directory k1m wrote removed.
cat >"$UNINSTALL" <<'UNINSTALL'
#!/usr/bin/env bash
# Written by k1m's install.sh: removes k1m from this machine (installed
# Debian packages stay).
set -euo pipefail
[[ $(id -u) == 0 ]] || { echo "k1m-uninstall: run as root" >&2; exit 1; }
systemd=false
[[ -d /run/systemd/system ]] && systemd=true
for role in server agent; do
  unit=/etc/systemd/system/k1m-$role.service
  [[ -f $unit ]] || continue
  if $systemd; then
    echo "k1m-uninstall: stopping k1m-$role"
    systemctl disable --now "k1m-$role.service"
  fi
  rm -f "$unit"
done
if $systemd; then
  systemctl daemon-reload
  systemctl reset-failed k1m-server.service k1m-agent.service 2>/dev/null || true
fi
if pids=$(pidof k1m); then
  echo "k1m-uninstall: k1m still runs (pid $pids): stop it first" >&2
  exit 1
fi
[[ ! -x /usr/local/bin/k1m ]] || /usr/local/bin/k1m cleanup
# k1m cleanup released every mount under these; rm must not cross one.
left=$(awk '$5 ~ "^/(var/lib|run)/k1m(/|$)" {print $5}' /proc/self/mountinfo)
[[ -z $left ]] || { echo "k1m-uninstall: still mounted, nothing removed: $left" >&2; exit 1; }
# What the pods' shims, runc and CNI kept outside k1m's directories, in
# places any containerd shares: runc's state, the shim sockets (named by
# the hash of containerd's socket, namespace and task) and CNI's results.
for task in /run/k1m/*/containerd/io.containerd.runtime.v2.task/*/*; do
  [[ -d $task ]] || continue
  id=${task##*/} ns=$(basename "$(dirname "$task")") sock=${task%%/io.containerd.runtime.v2.task/*}/containerd.sock
  rm -rf "/run/containerd/runc/$ns/$id" "/run/containerd/s/$(printf '%s' "$sock/$ns/$id" | sha256sum | cut -d' ' -f1)"
  rm -f /var/lib/cni/results/*-"$id"-*
done
# /var/lib/kubelet holds the kubelet's fixed device-plugin socket (one
# kubelet per machine: k1m's); the pod logs are the kubelet's too.
rm -rf /etc/k1m /var/lib/k1m /run/k1m /var/lib/kubelet /var/log/pods /var/log/containers /etc/modules-load.d/k1m.conf
for dir in /run/containerd/runc/k8s.io /run/containerd/runc /run/containerd/s /var/lib/cni/results /var/lib/cni /run/netns; do
  rmdir "$dir" 2>/dev/null || true # only when empty
done
rm -f /usr/local/bin/k1m /usr/local/bin/k1m-uninstall.sh
echo "k1m-uninstall: k1m removed"
UNINSTALL
chmod 0755 "$UNINSTALL"

echo "install: k1m $(/usr/local/bin/k1m version | awk '{print $2}') in /usr/local/bin, images in /var/lib/k1m/images, unit $unit, uninstall with $UNINSTALL"
if [[ -d /run/systemd/system ]]; then
  systemctl daemon-reload
  systemctl enable "k1m-$role.service"
  systemctl restart "k1m-$role.service" # a reinstall runs the new binary and flags
  echo "install: k1m-$role started: journalctl -u k1m-$role -f"
else
  echo "install: this machine does not run systemd: start it with: /usr/local/bin/k1m ${args[*]}"
fi
