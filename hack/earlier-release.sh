#!/usr/bin/env bash
# Builds the earlier k1m release `make upgrade-test` starts from: a clone
# of this repository at COMMIT, built by its own k1m-build, into
# DIR/_output/bin/k1m. Kept while DIR holds COMMIT's build. The binary is
# also kept in the machine's cache, by commit (K1M_CACHE_DIR, default
# ~/.cache/k1m; docs/build.md), so a fresh clone does not build it again.
# NAME is the make variable that named COMMIT, for messages.
# Usage: hack/earlier-release.sh COMMIT DIR [NAME]
set -euo pipefail
usage="usage: hack/earlier-release.sh COMMIT DIR [NAME]"
commit=${1:?$usage}
dir=${2:?$usage}
name=${3:-UPGRADE_FROM}
cd "$(dirname "$0")/.."
if ! want=$(git rev-parse --verify --quiet "$commit^{commit}"); then
  echo "$name=$commit: no such commit or tag in this clone (a shallow clone lacks it: git fetch --unshallow --tags)" >&2
  exit 1
fi
if [[ -x $dir/_output/bin/k1m && $(git -C "$dir" rev-parse HEAD 2>/dev/null) == "$want" ]]; then
  echo "earlier release $want: built already ($dir/_output/bin/k1m)"
  exit 0
fi
cache=${K1M_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/k1m}/earlier-release/$want
rm -rf "$dir"
git clone --quiet --shared --no-checkout . "$dir"
git -C "$dir" -c advice.detachedHead=false checkout --quiet "$want"
if [[ -x $cache/k1m ]] && (cd "$cache" && sha256sum --quiet -c k1m.sha256 2>/dev/null); then
  mkdir -p "$dir/_output/bin"
  cp "$cache/k1m" "$dir/_output/bin/k1m.partial"
  mv "$dir/_output/bin/k1m.partial" "$dir/_output/bin/k1m"
  echo "earlier release $want: from the cache ($cache/k1m)"
  exit 0
fi
echo "building the earlier release $want in $dir (its own k1m-build)"
(
  cd "$dir"
  # GOWORK=off: DIR may lie under this tree's _output, whose go.work is
  # not the earlier release's (its k1m-build makes its own).
  GOWORK=off go run ./build/cmd/k1m-build build --flavor k1m --out _output
)
mkdir -p "$cache"
rm -f "$cache/k1m.sha256"
cp "$dir/_output/bin/k1m" "$cache/k1m"
(cd "$cache" && sha256sum k1m >k1m.sha256)
echo "earlier release $want: kept in $cache"
