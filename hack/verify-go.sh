#!/usr/bin/env bash
# gofmt and go vet on k1m's own code. usage: hack/verify-go.sh k1m|stock
#   k1m:   gofmt, go vet built against the patched tree (the flavour k1m
#          ships), and the docs checked against the code;
#   stock: the product built and vetted in the stock flavour (pkg/flavor's
#          other file): make test runs it in its builds lane (Makefile).
# vet runs with the build's flags, so it shares the build cache with make
# build and make test.
set -euo pipefail
cd "$(dirname "$0")/.."
case ${1:-} in
k1m)
  unformatted=$(gofmt -l cmd pkg test manifests conformance bench build)
  if [[ -n $unformatted ]]; then
    echo "gofmt: these files need formatting (run gofmt -w):" >&2
    echo "$unformatted" >&2
    exit 1
  fi
  go run ./build/cmd/k1m-build go --flavor k1m vet ./...
  # Docs checked against the code they describe: docs/server.md's tables of
  # the server's phases and of its data directory, the flags the docs give
  # k1m's commands, the data directory paths the help texts name; and the
  # docs themselves: links and anchors resolve, reference pages carry no
  # dates (build/docscheck).
  go run ./build/cmd/k1m-build go --flavor k1m test -run '^(TestPhaseTable|TestDocsTable|TestDocsNameRealFlags|TestHelpNamesRealDataDirFiles|TestDocsLinksResolve|TestReferencePagesHaveNoDates)$' ./pkg/server/ ./pkg/datadir/ ./pkg/cli/ ./build/docscheck/
  echo "verify-go: gofmt and go vet clean against the patched tree; docs/server.md's tables match pkg/server and pkg/datadir; the docs' k1m flags and the help's DATA-DIR paths exist; links resolve; reference pages carry no dates"
  ;;
stock)
  # The product only, as make build-stock builds it.
  go run ./build/cmd/k1m-build go --flavor stock build ./cmd/... ./pkg/...
  go run ./build/cmd/k1m-build go --flavor stock vet ./cmd/... ./pkg/...
  echo "verify-go: the stock flavour builds and vets clean"
  ;;
*)
  echo "usage: hack/verify-go.sh k1m|stock" >&2
  exit 2
  ;;
esac
