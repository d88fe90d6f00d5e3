#!/bin/busybox sh
# k1m kube-proxy image: pick the node's iptables backend, then run the call.
set -e
bb=/bin/busybox
legacy=$( (iptables-legacy-save; ip6tables-legacy-save) 2>/dev/null | $bb grep -c '^-' || true)
nft=$( (iptables-nft-save; ip6tables-nft-save) 2>/dev/null | $bb grep -c '^-' || true)
mode=nft
[ "${legacy:-0}" -ge "${nft:-0}" ] && mode=legacy
for cmd in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
  $bb ln -sf "xtables-$mode-multi" "/usr/sbin/$cmd"
done
exec "$0" "$@"
