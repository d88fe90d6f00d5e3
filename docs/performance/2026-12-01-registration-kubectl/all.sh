#!/bin/bash
# One run of each shape: k1m, k1m with the controller-manager at stock's
# client rate, stock; a fresh make cluster each (its data under
# /var/lib/k1m removed before and after). Run from anywhere, as root, with
# both flavours built (make build build-stock images).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(realpath "${1:?usage: all.sh RESULTS.jsonl}")
cd "$here/../../.."
one() { # label flavor server-args
  local label=$1 flavor=$2 args=$3 bin=_output/bin/k1m
  [ "$flavor" = stock ] && bin=_output/stock/bin/k1m
  FLAVOR=$flavor make cluster-down >/dev/null 2>&1; rm -rf /var/lib/k1m
  SERVER_ARGS="$args" FLAVOR=$flavor make cluster > "${out%.jsonl}-cluster-$label.log" 2>&1 || { echo "cluster $label failed"; return; }
  until [ "$($bin kubectl --kubeconfig /var/lib/k1m/server/admin.kubeconfig get pods -A --no-headers 2>/dev/null | grep -c Running)" -ge 4 ]; do sleep 2; done
  sleep 15
  "$here/run.sh" $bin 2000 $label >> "$out"
  FLAVOR=$flavor make cluster-down >/dev/null 2>&1; rm -rf /var/lib/k1m
}
one k1m k1m ""
one k1m-cm20 k1m "--kube-controller-manager-arg=kube-api-qps=20 --kube-controller-manager-arg=kube-api-burst=40"
one stock stock ""
echo finished
