#!/usr/bin/env bash
# gofmt and go vet on k1m's own code, built against the patched tree (the
# flavour k1m ships), then the product built and vetted in the stock
# flavour. vet runs with the build's flags, so it shares the build cache
# with make build and make test.
set -euo pipefail
cd "$(dirname "$0")/.."
unformatted=$(gofmt -l cmd pkg test manifests conformance bench build)
if [[ -n $unformatted ]]; then
  echo "gofmt: these files need formatting (run gofmt -w):" >&2
  echo "$unformatted" >&2
  exit 1
fi
go run ./build/cmd/k1m-build go --flavor k1m vet ./...
# The stock flavour (pkg/flavor's other file) compiles and vets too: the
# product only, as make build-stock builds it.
go run ./build/cmd/k1m-build go --flavor stock build ./cmd/... ./pkg/...
go run ./build/cmd/k1m-build go --flavor stock vet ./cmd/... ./pkg/...
# Docs checked against the code they describe: docs/server.md's tables of
# the server's phases and of its data directory.
go run ./build/cmd/k1m-build go --flavor k1m test -run '^(TestPhaseTable|TestDocsTable)$' ./pkg/server/ ./pkg/datadir/
echo "verify-go: gofmt and go vet clean, both flavours; docs/server.md's phase and data directory tables match pkg/server and pkg/datadir"
