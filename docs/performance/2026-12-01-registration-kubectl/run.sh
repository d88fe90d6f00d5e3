#!/bin/bash
# Registers N Nodes by one kubectl create -f of a List (one sequential
# stream, as a new user would) on the running make cluster, and reports
# when the creates ended, when node IPAM had given every one a pod range
# and when the route publisher had published every route, with the
# server process tree's CPU by program at each point (JSON lines).
# usage: run.sh K1M-BINARY N LABEL
set -euo pipefail
k1m=$1 n=$2 label=$3
kc=/var/lib/k1m/server/admin.kubeconfig
here=$(dirname "$0")
kubectl() { "$k1m" kubectl --kubeconfig "$kc" "$@"; }
pid=$(pgrep -f "k1m server" -o)
mark() { printf '{"label":"%s","at":"%s","t":%s,"cpu":%s}\n' "$label" "$1" "$(date +%s.%N)" "$(python3 "$here/cpu.py" "$pid")"; }
python3 "$here/nodes.py" "$n" > "${TMPDIR:-/tmp}/nodes.json"
mark start
kubectl create -f "${TMPDIR:-/tmp}/nodes.json" > /dev/null
mark created
until [ "$(kubectl get nodes -l k1m.dev/simulated=true -o jsonpath='{range .items[*]}{.spec.podCIDRs[0]}{"\n"}{end}' | grep -c .)" -ge "$n" ]; do sleep 1; done
mark ranges
until [ "$(kubectl -n k1m-pod-routes get cm --no-headers | grep -c sim-)" -ge "$n" ]; do sleep 2; done
mark routes
