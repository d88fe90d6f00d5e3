#!/usr/bin/env bash
# Installs k1m on this machine as a systemd service, like k3s's installer:
# the binary, the image archives, the runtime packages, a config file and a
# unit for the server or the agent role. Run from a checkout after
# `make build images` (or give K1M_BIN and K1M_IMAGES).
#
# usage: hack/install.sh server [k1m server flags...]
#        K1M_TOKEN=<token> hack/install.sh agent --server https://[IPv6]:6443 [flags...]
set -euo pipefail

role=${1:-}
shift || true
case $role in
  server | agent) ;;
  *) echo "usage: hack/install.sh server|agent [flags for k1m $role]" >&2; exit 2 ;;
esac
if [[ $(id -u) != 0 ]]; then
  echo "install: run as root" >&2
  exit 1
fi
if [[ $role == agent && -z ${K1M_TOKEN:-} ]]; then
  echo "install: K1M_TOKEN is empty: set it to the server's token (cat /var/lib/k1m/server/token on the server)" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${K1M_BIN:-$here/_output/bin/k1m}
images=${K1M_IMAGES:-$here/_output/images}
[[ -x $bin ]] || { echo "install: $bin missing: run make build (or set K1M_BIN)" >&2; exit 1; }
ls "$images"/*.tar >/dev/null 2>&1 || { echo "install: no image archives in $images: run make images (or set K1M_IMAGES)" >&2; exit 1; }

"$here/hack/install-deps.sh" cluster
install -m 0755 "$bin" /usr/local/bin/k1m
install -d -m 0755 /var/lib/k1m/images /etc/k1m
install -m 0644 "$images"/*.tar /var/lib/k1m/images/
[[ -f /etc/k1m/config.yaml ]] || echo "# k1m $role settings: keys are the flag names (k1m $role --help)" >/etc/k1m/config.yaml
umask 077
: >/etc/k1m/k1m.env
token_args=""
if [[ $role == agent ]]; then
  # Read once at the join, deleted by the agent once the node has its own
  # certificate: no join credential stays on the machine.
  echo "$K1M_TOKEN" >/etc/k1m/join-token
  token_args="--token-file /etc/k1m/join-token "
fi

unit=/etc/systemd/system/k1m-$role.service
cat >"$unit" <<UNIT
[Unit]
Description=k1m $role (Kubernetes 1.32 for very large clusters)
Wants=network-online.target
After=network-online.target

[Service]
Type=simple
EnvironmentFile=-/etc/k1m/k1m.env
ExecStart=/usr/local/bin/k1m $role $token_args$*
KillMode=process
Delegate=yes
LimitNOFILE=1048576
Restart=always
RestartSec=5s

[Install]
WantedBy=multi-user.target
UNIT
chmod 0644 "$unit"
echo "install: k1m $(/usr/local/bin/k1m version) in /usr/local/bin, images in /var/lib/k1m/images, unit $unit"
if [[ -d /run/systemd/system ]]; then
  systemctl daemon-reload
  systemctl enable --now "k1m-$role.service"
  echo "install: k1m-$role started: journalctl -u k1m-$role -f"
else
  echo "install: this machine does not run systemd: start it with: /usr/local/bin/k1m $role $*"
fi
