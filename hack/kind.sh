#!/usr/bin/env bash
# kind clusters from the k1m node image (make kind-image): thin glue around
# the kind CLI built from its module, for make kind-up / kind-down /
# kind-test.
#
# usage: hack/kind.sh up|down|test|conformance|conformance-test
# env:   KIND (the kind binary), OUT (_output), NAME (cluster, default k1m),
#        PURGE=1 (down: also remove k1m's kind images and the dockerd
#        hack/docker.sh started)
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-_output}
[[ $OUT == /* ]] || OUT=$PWD/$OUT # the Go test runs in its own directory
KIND=${KIND:-$OUT/kind/bin/kind}
NAME=${NAME:-k1m}
IMAGE=${IMAGE:-k1m.local/kind-node:latest}
CONFIG=${CONFIG:-manifests/kind/cluster.yaml}
KUBECONFIG_KIND=$OUT/kind/kubeconfig
KUBECTL=$OUT/bin/kubectl
export DOCKER_DIR=${DOCKER_DIR:-$OUT/docker}
log() { echo "kind: $*"; }

exists() { "$KIND" get clusters 2>/dev/null | grep -qx "$NAME"; }

up() {
  if exists; then
    echo "kind: cluster $NAME exists; make kind-down first (or use it: KUBECONFIG=$KUBECONFIG_KIND)" >&2
    exit 1
  fi
  local start=$SECONDS
  log "creating cluster $NAME from $IMAGE with $CONFIG"
  "$KIND" create cluster --name "$NAME" --image "$IMAGE" --config "$CONFIG" --kubeconfig "$KUBECONFIG_KIND" --wait 5m
  local want; want=$("$KIND" get nodes --name "$NAME" | wc -l)
  for _ in $(seq 1 60); do
    ready=$("$KUBECTL" --kubeconfig "$KUBECONFIG_KIND" get nodes --no-headers 2>/dev/null | awk '$2 == "Ready"' | wc -l)
    ((ready >= want)) && break
    log "waiting: $ready/$want nodes Ready"
    sleep 5
  done
  "$KUBECTL" --kubeconfig "$KUBECONFIG_KIND" get nodes -o wide
  cat <<MSG

kind cluster $NAME up after $((SECONDS - start))s.
  kubeconfig: $KUBECONFIG_KIND
  use it:     $KUBECTL --kubeconfig $KUBECONFIG_KIND get pods -A
  stop:       make kind-down (PURGE=1 also removes the images)
MSG
}

down() {
  if exists; then
    "$KIND" delete cluster --name "$NAME" --kubeconfig "$KUBECONFIG_KIND"
  fi
  # kind leaves its docker network behind; remove it once no node uses it.
  if docker network inspect kind >/dev/null 2>&1 && [[ -z $(docker network inspect kind -f '{{range .Containers}}x{{end}}') ]]; then
    docker network rm kind >/dev/null && log "removed the docker network kind"
  fi
  if [[ ${PURGE:-} == 1 ]]; then
    local images; images=$(docker images --format '{{.Repository}}:{{.Tag}}' | grep -E '^k1m\.local/kind-(node|base):' || true)
    [[ -n $images ]] && docker rmi $images >/dev/null && log "removed images: $(echo $images)"
    hack/docker.sh down
  fi
}

conformance() { # Sonobuoy's quick mode against the running kind cluster
  local img
  for img in "$OUT"/conformance/images/*.tar; do
    log "loading $img into the nodes"
    "$KIND" load image-archive "$img" --name "$NAME"
  done
  "$OUT/conformance/bin/k1m-conformance" run --mode quick --timeout 20m \
    --kubeconfig "$KUBECONFIG_KIND" --repo-list "$OUT/conformance/repo-list.yaml" --out "$OUT/kind/conformance"
}

finish() { # after a test: the cluster and the dockerd hack/docker.sh started go
  down
  hack/docker.sh down
}

test() { # a fresh cluster, the checks of test/kind, then down
  down
  trap finish EXIT
  up
  log "loading the busybox test image"
  "$KIND" load image-archive "$OUT/images/busybox.tar" --name "$NAME"
  K1M_KIND_KUBECONFIG=$KUBECONFIG_KIND K1M_KIND_NAME=$NAME KUBECTL=$KUBECTL \
    go run ./build/cmd/k1m-build go --flavor k1m --out "$OUT" test -count=1 -timeout 20m -v ./test/kind/
}

conformance-test() { # a fresh cluster, Sonobuoy's quick mode in it, then down
  down
  trap finish EXIT
  up
  conformance
}

case ${1:-} in
  up | down | test | conformance | conformance-test) "$1" ;;
  *) echo "usage: hack/kind.sh up|down|test|conformance|conformance-test" >&2; exit 2 ;;
esac
