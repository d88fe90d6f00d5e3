#!/usr/bin/env bash
# One step of make test's builds lane (Makefile, "make test in two lanes";
# docs/build.md): runs COMMAND at the lowest CPU priority, so it takes only
# the CPU the checks lane leaves idle, with its output in LOG; says when it
# starts and ends, and on failure prints the log's last lines.
# usage: hack/builds-lane.sh NAME LOG COMMAND...
set -euo pipefail
usage="usage: hack/builds-lane.sh NAME LOG COMMAND..."
name=${1:?$usage}
log=${2:?$usage}
shift 2
(($# > 0)) || { echo "$usage" >&2; exit 2; }
mkdir -p "$(dirname "$log")"
echo "builds lane: $name started at the lowest CPU priority (log: $log)"
start=$SECONDS
rc=0
nice -n 19 "$@" >"$log" 2>&1 || rc=$?
took=$((SECONDS - start))
if ((rc != 0)); then
  echo "builds lane: $name FAILED after ${took}s (exit $rc); the last 60 lines of $log:" >&2
  tail -n 60 "$log" >&2
  exit "$rc"
fi
echo "builds lane: $name done in ${took}s"
