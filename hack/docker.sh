#!/usr/bin/env bash
# Makes sure a Docker engine answers, for kind. When none does, starts
# Debian's dockerd in the background (log: $DOCKER_DIR/dockerd.log). On a
# host whose root lacks CAP_SYS_RESOURCE, `docker run --privileged` fails
# ("unable to apply caps"), so k1m-docker-runc (which drops that one
# capability from the container's config) becomes dockerd's default runtime.
# Thin glue; the runtime's logic is Go (test/runcshim).
#
# usage: hack/docker.sh up SHIM   (SHIM: the built k1m-docker-runc)
#        hack/docker.sh down      (stops the dockerd this script started)
set -euo pipefail

DOCKER_DIR=${DOCKER_DIR:-_output/docker}
SHIM_PATH=/usr/local/bin/k1m-docker-runc
CONFIG=/etc/docker/daemon.json
log() { echo "docker: $*"; }

lacks_sys_resource() { # CAP_SYS_RESOURCE is bit 24 of the effective set
  local eff; eff=$(awk '/^CapEff:/ {print $2}' /proc/self/status)
  (( ((16#$eff >> 24) & 1) == 0 ))
}

default_runtime() { docker info --format '{{.DefaultRuntime}}' 2>/dev/null; }

write_config() {
  if [[ -f $CONFIG ]] && ! grep -q k1m-docker-runc "$CONFIG"; then
    echo "docker: $CONFIG exists and is not k1m's; add to it:" >&2
    echo "  \"runtimes\": {\"k1m-runc\": {\"path\": \"$SHIM_PATH\"}}, \"default-runtime\": \"k1m-runc\"" >&2
    exit 1
  fi
  mkdir -p "$(dirname "$CONFIG")"
  cat >"$CONFIG" <<JSON
{
  "runtimes": {"k1m-runc": {"path": "$SHIM_PATH"}},
  "default-runtime": "k1m-runc"
}
JSON
  log "registered $SHIM_PATH as the default runtime in $CONFIG (this host lacks CAP_SYS_RESOURCE)"
}

up() {
  local shim=$1 need_shim=false
  lacks_sys_resource && need_shim=true
  if $need_shim; then install -m 0755 "$shim" "$SHIM_PATH"; fi
  if docker info >/dev/null 2>&1; then
    if $need_shim && [[ $(default_runtime) != k1m-runc ]]; then
      echo "docker: a Docker engine runs, but this host lacks CAP_SYS_RESOURCE and its default runtime is $(default_runtime):" >&2
      echo "  --privileged containers (kind's nodes) will fail. Register $SHIM_PATH as the default runtime" >&2
      echo "  (\"runtimes\": {\"k1m-runc\": {\"path\": \"$SHIM_PATH\"}}, \"default-runtime\": \"k1m-runc\" in $CONFIG) and restart dockerd," >&2
      echo "  or stop it and run this again (it starts its own dockerd)." >&2
      exit 1
    fi
    return 0
  fi
  command -v dockerd >/dev/null || { echo "docker: dockerd not found: make deps-kind installs docker.io" >&2; exit 1; }
  $need_shim && write_config
  mkdir -p "$DOCKER_DIR"
  log "starting dockerd (log $DOCKER_DIR/dockerd.log)"
  setsid dockerd >>"$DOCKER_DIR/dockerd.log" 2>&1 </dev/null &
  echo $! >"$DOCKER_DIR/dockerd.pid"
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && { log "dockerd ready (default runtime $(default_runtime))"; return 0; }
    kill -0 "$(cat "$DOCKER_DIR/dockerd.pid")" 2>/dev/null || break
    sleep 1
  done
  echo "docker: dockerd did not come up; see $DOCKER_DIR/dockerd.log" >&2
  tail -5 "$DOCKER_DIR/dockerd.log" >&2
  exit 1
}

down() {
  local f=$DOCKER_DIR/dockerd.pid pid
  [[ -f $f ]] || { log "no dockerd started by k1m"; return 0; }
  pid=$(cat "$f")
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  rm -f "$f"
  log "dockerd stopped"
}

case ${1:-} in
  up) [[ -n ${2:-} ]] || { echo "usage: hack/docker.sh up SHIM" >&2; exit 2; }; up "$2" ;;
  down) down ;;
  *) echo "usage: hack/docker.sh up SHIM|down" >&2; exit 2 ;;
esac
