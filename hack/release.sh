#!/usr/bin/env bash
# The release artifact, like k3s's air-gap bundle: one directory that
# installs k1m on a Debian bookworm machine with no Go and no source tree.
#
#   $OUT/release/k1m             the binary (make build)
#   $OUT/release/images/*.tar    the image archives nodes import (make images)
#   $OUT/release/install.sh      hack/install.sh (the runtime packages written in): installs the service, writes k1m-uninstall.sh
#   $OUT/release/sha256sum.txt   sha256sum of every other file (install.sh checks it first)
#
# and the same directory as $OUT/k1m-release-<version>-linux-<arch>.tar.gz
# (unpacks into k1m-release-<version>-linux-<arch>/), with its .sha256.
#
# usage: hack/release.sh build   (make release)
#        hack/release.sh test    (make release-test: test/release, then the
#                                 dockerd hack/docker.sh started is stopped)
#        hack/release.sh install-sh   (prints the release's install.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-_output}
[[ $OUT == /* ]] || OUT=$PWD/$OUT # the Go test runs in its own directory
DIR=$OUT/release
log() { echo "release: $*"; }

# install-sh prints hack/install.sh as a release ships it. A release has no
# checkout: in place of the lines that read RUNTIME_PACKAGES from
# build/debian/packages.env (from "# >>> RUNTIME_PACKAGES" to
# "# <<< RUNTIME_PACKAGES") go the packages, as an array, under the comment
# that says there what they are for.
install-sh() {
  local env=build/debian/packages.env line about="" packages in=false
  while IFS= read -r line; do
    case $line in
      RUNTIME_PACKAGES=*) break ;;
      '#'*) about+=$line$'\n' ;;
      *) about="" ;;
    esac
  done <"$env"
  # shellcheck source=build/debian/packages.env
  packages=$(source "$env" && echo "$RUNTIME_PACKAGES")
  [[ -n $about && -n $packages ]] || { echo "release: no commented RUNTIME_PACKAGES in $env" >&2; exit 1; }
  while IFS= read -r line; do
    case $line in
      '# >>> RUNTIME_PACKAGES'*) in=true ;;
      '# <<< RUNTIME_PACKAGES'*) in=false && printf '%sRUNTIME_PACKAGES=(%s)\n' "$about" "$packages" ;;
      *) $in || printf '%s\n' "$line" ;;
    esac
  done <hack/install.sh
  ! $in || { echo "release: hack/install.sh has no line # <<< RUNTIME_PACKAGES" >&2; exit 1; }
}

build() {
  local k1m=$OUT/bin/k1m version arch tarball files start=$SECONDS
  [[ -x $k1m ]] || { echo "release: $k1m missing: make build" >&2; exit 1; }
  ls "$OUT"/images/*.tar >/dev/null 2>&1 || { echo "release: no image archives in $OUT/images: make images" >&2; exit 1; }
  version=$("$k1m" version | awk '{print $2}')
  arch=$(dpkg --print-architecture)
  log "k1m $version ($arch) into $DIR"
  rm -rf "$DIR.tmp"
  mkdir -p "$DIR.tmp/images"
  install -m 0755 "$k1m" "$DIR.tmp/k1m"
  install -m 0644 "$OUT"/images/*.tar "$DIR.tmp/images/"
  install-sh >"$DIR.tmp/install.sh"
  chmod 0755 "$DIR.tmp/install.sh"
  mapfile -t files < <(cd "$DIR.tmp" && find . -type f -printf '%P\n' | LC_ALL=C sort)
  log "sha256sum.txt over ${#files[@]} files"
  (cd "$DIR.tmp" && sha256sum "${files[@]}" >sha256sum.txt)
  rm -rf "$DIR"
  mv "$DIR.tmp" "$DIR"
  tarball=$OUT/k1m-release-$version-linux-$arch.tar.gz
  log "writing $tarball"
  rm -f "$OUT"/k1m-release-*.tar.gz "$OUT"/k1m-release-*.tar.gz.sha256
  tar -C "$OUT" --transform "s|^release|k1m-release-$version-linux-$arch|" --owner=0 --group=0 -czf "$tarball" release
  (cd "$OUT" && sha256sum "$(basename "$tarball")" >"$tarball.sha256")
  (cd "$DIR" && sed 's/^/release:   /' sha256sum.txt)
  log "done in $((SECONDS - start))s: $DIR ($(du -sh "$DIR" | cut -f1)), $(basename "$tarball") ($(du -sh "$tarball" | cut -f1))"
}

test() {
  export DOCKER_DIR=${DOCKER_DIR:-$OUT/docker}
  trap 'hack/docker.sh down' EXIT
  # make test's kind-test stopped the dockerd kind-image started.
  hack/docker.sh up "$OUT/kind/bin/k1m-docker-runc"
  local tarballs=("$OUT"/k1m-release-*.tar.gz)
  ((${#tarballs[@]} == 1)) || { echo "release: want one $OUT/k1m-release-*.tar.gz, found ${tarballs[*]}: make release" >&2; exit 1; }
  K1M_RELEASE_DIR=$DIR K1M_RELEASE_TARBALL=${tarballs[0]} go run ./build/cmd/k1m-build go --flavor k1m --out "$OUT" test -count=1 -timeout 15m -v ./test/release/
}

case ${1:-} in
  build | test | install-sh) "$1" ;;
  *) echo "usage: hack/release.sh build|test|install-sh" >&2; exit 2 ;;
esac
