#!/usr/bin/env bash
# make test's conformance part: a fresh k1m cluster of 3 servers (raft
# etcds, leader-elected controllers) and 2 agents, the conformance images
# imported into every node, the nodes spread over 3 zones, then k1m's
# curated specs (leases, node lifecycle, events, watch
# and list, Services over IPv6, DNS, a DaemonSet, four NetworkPolicy specs)
# in a parallel run, then the cluster is taken down. (The replicated
# database, test/database, runs in make upgrade-test.)
# Thin glue around hack/cluster.sh (which runs test/cmd/k1m-cluster) and
# k1m-conformance.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-_output}
export K1M=${K1M:-$OUT/bin/k1m}
export SERVERS=3 NODES=5 ZONES=3
export CLUSTER_DIR=$OUT/conformance-test/cluster
export DATA_ROOT=${DATA_ROOT:-/var/lib/k1m-conformance-test}
export IMAGES_DIR=$OUT/images
RESULTS=$OUT/conformance-test/results

down() { hack/cluster.sh down >/dev/null 2>&1 || true; }
trap down EXIT
down
rm -rf "$DATA_ROOT" "$CLUSTER_DIR"
mkdir -p "$CLUSTER_DIR"
hack/cluster.sh up
hack/cluster.sh import "$OUT/conformance/images"
run() {
  "$OUT/conformance/bin/k1m-conformance" run --timeout 20m \
    --kubeconfig "$DATA_ROOT/server/admin.kubeconfig" \
    --repo-list "$OUT/conformance/repo-list.yaml" --out "$RESULTS" "$@"
}
# Sonobuoy's quick mode (one spec) is left to make kind-conformance and
# runs by hand: the curated run goes through the same runner and layout.
# Parallel: its [Serial] DaemonSet spec goes through the second phase.
run --mode k1m-curated --parallel --procs 3
# Passed: the cluster goes with its data (about 11 GiB: five nodes' images
# and three servers' etcds, which would fill the disk run after run); a
# failed run keeps the data to look at, under DATA_ROOT.
down
trap - EXIT
rm -rf "$DATA_ROOT"
