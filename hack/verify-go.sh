#!/usr/bin/env bash
# gofmt and go vet on k1m's own code, in both flavours (GOWORK=off builds
# against the stock modules; k1m code must compile against both).
set -euo pipefail
cd "$(dirname "$0")/.."
unformatted=$(gofmt -l cmd pkg)
if [[ -n $unformatted ]]; then
  echo "gofmt: these files need formatting (run gofmt -w):" >&2
  echo "$unformatted" >&2
  exit 1
fi
GOWORK=off go vet -tags k1m_stock ./...
GOWORK="$PWD/_output/go.work" go vet -tags k1m_patched ./...
echo "verify-go: gofmt and go vet clean (stock and k1m flavours)"
