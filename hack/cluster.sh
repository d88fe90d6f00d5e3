#!/usr/bin/env bash
# Starts and stops a local k1m cluster: `k1m server` on this machine and
# NODES-1 agents, each in its own network namespace with its own IPv6
# address on a bridge (k1m-nodes, fddf:4035:b520::/64), as separate nodes.
# Thin glue around the k1m binary; `make cluster` / `make cluster-down`.
#
# usage: hack/cluster.sh up|down|restart-server|stop-server|start-server|
#        reset-server FILE|restart-agent I|import DIR
# env:   NODES (default 1), K1M (binary), CLUSTER_DIR (logs, pids),
#        DATA_ROOT (server and node data), IMAGES_DIR, SERVER_ARGS (extra
#        k1m server flags)
set -euo pipefail

NODES=${NODES:-1}
K1M=${K1M:-_output/bin/k1m}
CLUSTER_DIR=${CLUSTER_DIR:-_output/cluster}
DATA_ROOT=${DATA_ROOT:-/var/lib/k1m}
IMAGES_DIR=${IMAGES_DIR:-_output/images}
BRIDGE=k1m-nodes
PREFIX=fddf:4035:b520
SERVER_IP=$PREFIX::1
TIMEOUT=${TIMEOUT:-300}

server_data() { echo "$DATA_ROOT/server"; }
node_name() { echo "k1m-node-$1"; }
kubectl() { "$K1M" kubectl --kubeconfig "$(server_data)/admin.kubeconfig" "$@"; }
log() { echo "cluster: $*"; }
node_namespaces() { ip netns list 2>/dev/null | awk '/^k1m-node-/ {print $1}'; }
namespace_pids() { ip netns pids "$1" 2>/dev/null | tr '\n' ' '; }

if ! [[ $NODES =~ ^[1-9][0-9]?$ ]]; then
  echo "cluster: NODES=$NODES: want a number of nodes from 1 to 99" >&2
  exit 2
fi

node_net_up() { # create the bridge and node i's namespace
  local i=$1 ns; ns=$(node_name "$i")
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge
    ip -6 addr add "$SERVER_IP/64" dev "$BRIDGE" nodad
    ip link set "$BRIDGE" up
  fi
  ip netns add "$ns"
  ip link add "veth-$i" type veth peer name eth0 netns "$ns"
  ip link set "veth-$i" master "$BRIDGE" up
  # Hairpin: the server DNATs a NodePort connection from node i's pod to a
  # backend on node i, and br_netfilter hands that packet back to the bridge
  # (bridged DNAT) instead of routing it; a bridge never sends a frame out
  # the port it came in on unless hairpin is on, so it was dropped.
  ip link set "veth-$i" type bridge_slave hairpin on
  ip -n "$ns" link set lo up
  ip -n "$ns" -6 addr add "$PREFIX::$(printf '%x' $((16 + i)))/64" dev eth0 nodad
  ip -n "$ns" link set eth0 up
  ip -n "$ns" -6 route add default via "$SERVER_IP"
}

server_args() {
  SERVER_CMD=(server --data-dir "$(server_data)" --images-dir "$IMAGES_DIR")
  ((NODES > 1)) && SERVER_CMD+=(--node-ip "$SERVER_IP")
  # shellcheck disable=SC2206 # extra flags, split on spaces on purpose
  SERVER_CMD+=(${SERVER_ARGS:-})
}

start_server() {
  server_args
  setsid "$K1M" "${SERVER_CMD[@]}" >>"$CLUSTER_DIR/server.log" 2>&1 < /dev/null &
  echo $! >"$CLUSTER_DIR/server.pid"
  log "k1m server started (pid $!, log $CLUSTER_DIR/server.log)"
}

start_agent() { # start_agent I [TOKEN]: a node joins with TOKEN; without it, it runs on its own certificate
  local i=$1 token=${2:-} ns; ns=$(node_name "$i")
  # nsenter, not ip netns exec: the latter remounts /sys, hiding the cgroup
  # file systems the kubelet needs.
  # The token goes in the environment, not argv: ps shows argv to everyone.
  K1M_TOKEN="$token" \
  nsenter --net="/run/netns/$ns" setsid "$K1M" agent --server "https://[$SERVER_IP]:6443" \
    --node-name "$ns" \
    --node-ip "$PREFIX::$(printf '%x' $((16 + i)))" \
    --data-dir "$DATA_ROOT/nodes/$ns" --run-dir "/run/k1m/$ns" --images-dir "$IMAGES_DIR" \
    --pod-logs-dir "$DATA_ROOT/nodes/$ns/pod-logs" \
    >>"$CLUSTER_DIR/$ns.log" 2>&1 < /dev/null &
  echo $! >"$CLUSTER_DIR/$ns.pid"
  log "k1m agent $ns started (pid $!, log $CLUSTER_DIR/$ns.log)"
}

wait_ready() {
  local deadline=$((SECONDS + TIMEOUT)) ready=0
  while ((SECONDS < deadline)); do
    kill -0 "$(cat "$CLUSTER_DIR/server.pid")" 2>/dev/null || { echo "cluster: k1m server exited; see $CLUSTER_DIR/server.log" >&2; tail -5 "$CLUSTER_DIR/server.log" >&2; return 1; }
    ready=$(kubectl get nodes --no-headers 2>/dev/null | awk '$2 == "Ready"' | wc -l)
    ((ready >= NODES)) && { log "$ready/$NODES nodes Ready after ${SECONDS}s"; return 0; }
    log "waiting: $ready/$NODES nodes Ready (${SECONDS}s)"
    sleep 5
  done
  echo "cluster: only $ready/$NODES nodes Ready after ${TIMEOUT}s; see $CLUSTER_DIR/*.log" >&2
  return 1
}

wait_file() {
  local deadline=$((SECONDS + TIMEOUT))
  until [[ -s $1 ]] && kubectl get --raw /readyz >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { echo "cluster: k1m server not up after ${TIMEOUT}s; see $CLUSTER_DIR/server.log" >&2; return 1; }
    kill -0 "$(cat "$CLUSTER_DIR/server.pid")" 2>/dev/null || { echo "cluster: k1m server exited; see $CLUSTER_DIR/server.log" >&2; tail -5 "$CLUSTER_DIR/server.log" >&2; return 1; }
    sleep 2
  done
}

# Every k1m cluster of this script uses the same bridge, addresses, netns
# names and API port, so only one can run on a machine. A cluster whose
# processes are gone (killed, machine session ended) leaves its namespaces
# behind: those are removed; a live one is refused with what to do.
check_machine_free() {
  local ns pids
  for ns in $(node_namespaces); do
    pids=$(namespace_pids "$ns")
    if [[ -n $pids ]]; then
      echo "cluster: another k1m cluster is running: network namespace $ns holds pids ${pids% };" \
        "stop it first (make cluster-down, or hack/cluster.sh down with that cluster's CLUSTER_DIR and DATA_ROOT)" >&2
      exit 1
    fi
    ip netns delete "$ns"
    log "removed network namespace $ns left by a cluster that was not taken down (no process in it)"
  done
  if ss -Hltn 'sport = :6443' 2>/dev/null | grep -q .; then
    echo "cluster: port 6443 is already in use (another k1m server or kube-apiserver?); stop it first (make cluster-down)" >&2
    exit 1
  fi
}

up() {
  if [[ -f $CLUSTER_DIR/server.pid ]] && kill -0 "$(cat "$CLUSTER_DIR/server.pid")" 2>/dev/null; then
    echo "cluster: already running (pid $(cat "$CLUSTER_DIR/server.pid")); make cluster-down first" >&2
    exit 1
  fi
  check_machine_free
  mkdir -p "$CLUSTER_DIR"
  echo "$NODES" >"$CLUSTER_DIR/nodes"
  for ((i = 1; i < NODES; i++)); do node_net_up "$i"; done
  ((NODES > 1)) && sysctl -qw net.ipv6.conf.all.forwarding=1
  start_server
  wait_file "$(server_data)/token"
  for ((i = 1; i < NODES; i++)); do start_agent "$i" "$(cat "$(server_data)/token")"; done
  wait_ready
  cat <<MSG

k1m cluster up: $NODES node(s).
  kubeconfig: $(server_data)/admin.kubeconfig
  use it:     export KUBECONFIG=$(server_data)/admin.kubeconfig; $K1M kubectl get nodes -o wide
              (or $K1M kubectl ..., which finds it by itself)
  logs:       $CLUSTER_DIR/*.log
  stop:       make cluster-down
MSG
}

stop_pid() {
  local f=$1 pid
  [[ -f $f ]] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 90); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

down() {
  for f in "$CLUSTER_DIR"/k1m-node-*.pid; do [[ -e $f ]] && stop_pid "$f"; done
  stop_pid "$CLUSTER_DIR/server.pid"
  "$K1M" cleanup --data-dir "$DATA_ROOT"
  # This cluster's agents are stopped, so its namespaces are empty; one that
  # still holds processes belongs to another cluster and is left to it.
  local ns busy=0
  for ns in $(node_namespaces); do
    for _ in $(seq 1 10); do [[ -z $(namespace_pids "$ns") ]] && break; sleep 1; done
    if [[ -n $(namespace_pids "$ns") ]]; then
      echo "cluster: network namespace $ns still holds processes (another cluster?); left as is" >&2
      busy=1
      continue
    fi
    ip netns delete "$ns"
  done
  if ((!busy)) && ip link show "$BRIDGE" >/dev/null 2>&1; then ip link delete "$BRIDGE"; fi
  # ip netns add bind-mounts /run/netns onto itself; release it when empty.
  if [[ -d /run/netns ]] && [[ -z $(ls -A /run/netns) ]] && mountpoint -q /run/netns; then umount /run/netns; fi
  rm -f "$CLUSTER_DIR/nodes"
  log "stopped; data kept under $DATA_ROOT (delete it for a fresh cluster)"
}

restart_server() { # for the crash test: kill -9 the server, then start it again
  kill -KILL "$(cat "$CLUSTER_DIR/server.pid")"
  sleep 1
  start_server
}

stop_server() { # SIGTERM: a clean stop; says whether it needed SIGKILL
  local pid; pid=$(cat "$CLUSTER_DIR/server.pid")
  stop_pid "$CLUSTER_DIR/server.pid"
  log "k1m server (pid $pid) stopped"
}

reset_server() { # the stopped server once with --cluster-reset (and FILE to restore, if given); its exit code
  server_args
  "$K1M" "${SERVER_CMD[@]}" --cluster-reset ${1:+--cluster-reset-restore-path "$1"} 2>&1 < /dev/null | tee -a "$CLUSTER_DIR/server.log"
  return "${PIPESTATUS[0]}"
}

run_server() { # the stopped server in the foreground with extra flags (for refusals); its exit code
  server_args
  "$K1M" "${SERVER_CMD[@]}" "$@" 2>&1 < /dev/null | tee -a "$CLUSTER_DIR/server.log"
  return "${PIPESTATUS[0]}"
}

restart_agent() { # stop agent I, then start it again with no token: a joined node needs none
  local i=$1
  stop_pid "$CLUSTER_DIR/$(node_name "$i").pid"
  start_agent "$i"
}

import_images() { # load every image archive of DIR into every node's containerd
  local dir=$1 socks=() sock archive
  for sock in /run/k1m/*/containerd/containerd.sock; do [[ -S $sock ]] && socks+=("$sock"); done
  ((${#socks[@]} > 0)) || { echo "cluster: no node's containerd is running (make cluster first)" >&2; exit 1; }
  for archive in "$dir"/*.tar; do
    [[ -e $archive ]] || { echo "cluster: no image archives (*.tar) in $dir" >&2; exit 1; }
    for sock in "${socks[@]}"; do
      log "importing $(basename "$archive") ($(du -h "$archive" | cut -f1)) into $(basename "$(dirname "$(dirname "$sock")")")"
      ctr --address "$sock" --namespace k8s.io images import --no-unpack=false "$archive" >/dev/null
    done
  done
}

case ${1:-} in
  up) up ;;
  import) import_images "${2:?usage: hack/cluster.sh import DIR}" ;;
  down) down ;;
  restart-server) restart_server ;;
  stop-server) stop_server ;;
  start-server) start_server; wait_file "$(server_data)/token" ;;
  reset-server) reset_server "${2:-}" ;;
  run-server) shift; run_server "$@" ;;
  restart-agent) restart_agent "${2:?usage: hack/cluster.sh restart-agent I}" ;;
  *) echo "usage: hack/cluster.sh up|down|restart-server|stop-server|start-server|reset-server [FILE]|run-server FLAGS...|restart-agent I|import DIR" >&2; exit 2 ;;
esac
