# k1m entry points. Logic lives in Go (cmd/k1m-build, pkg/build) and small
# scripts under hack/; this file only names the steps.
include build/versions.env

OUT       ?= _output
GO        ?= go
K1M_BUILD  = $(GO) run ./cmd/k1m-build
K1M_FLAGS  = --out $(OUT)

.PHONY: all build build-stock prepare verify unit test deps-build clean help

all: build

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 16

deps-build: ## install what building needs (Debian packages)
	@hack/install-deps.sh build

prepare: deps-build ## apply patches/ to pristine module copies ($(OUT)/src, $(OUT)/go.work)
	$(K1M_BUILD) prepare $(K1M_FLAGS)

build: deps-build ## build k1m and the patched components into $(OUT)/bin
	$(K1M_BUILD) build --flavor k1m $(K1M_FLAGS)

build-stock: deps-build ## build the same components, unpatched, into $(OUT)/stock/bin
	$(K1M_BUILD) build --flavor stock $(K1M_FLAGS)

verify: deps-build ## pins, patch headers, series applies, codegen, gofmt/vet, tests of patched packages
	$(K1M_BUILD) verify $(K1M_FLAGS)
	hack/verify-go.sh
	$(K1M_BUILD) test-patched $(K1M_FLAGS)

unit: deps-build ## unit tests of k1m's own code, built against the patched tree
	$(K1M_BUILD) go --flavor k1m $(K1M_FLAGS) test ./pkg/... ./cmd/...

test: verify unit ## the test command (README.md); CI runs exactly this

clean: ## remove generated trees and binaries
	rm -rf $(OUT)
