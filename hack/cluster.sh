#!/usr/bin/env bash
# The local cluster harness is Go now (test/cmd/k1m-cluster, test/localcluster);
# this builds it and runs it, so that `hack/cluster.sh VERB` keeps working:
# same verbs (up, down, import DIR, restart-server [I], stop-server [I],
# start-server [I], reset-server [FILE], run-server FLAGS...,
# restart-agent I) and environment (SERVERS, NODES, K1M, CLUSTER_DIR,
# DATA_ROOT, IMAGES_DIR, SERVER_ARGS, SERVER_MEMORY, POD_ROUTES, TIMEOUT).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/_output/tools/k1m-cluster
(cd "$root" && CGO_ENABLED=0 go build -o "$bin" ./test/cmd/k1m-cluster)
exec "$bin" "$@"
