# k1m entry points. Logic lives in Go (build/cmd/k1m-build, build) and small
# scripts under hack/; this file only names the steps.
include build/versions.env

OUT       ?= _output
GO        ?= go
K1M_BUILD  = $(GO) run ./build/cmd/k1m-build
K1M_FLAGS  = --out $(OUT)

# make cluster's size; empty: 1 server, and as many nodes as servers.
SERVERS   ?=
NODES     ?=
# FLAVOR=stock runs the same cluster from the unpatched build (make build-stock).
FLAVOR    ?= k1m
K1M_BIN    = $(if $(filter stock,$(FLAVOR)),$(OUT)/stock/bin/k1m,$(OUT)/bin/k1m)

.PHONY: bench-tools deps-kind kind-image kind-up kind-down kind-test kind-conformance all bench bench-full build build-k1m build-stock conformance conformance-images conformance-test deps-conformance prepare verify unit test integration faults faults-test upgrade-test deps-build deps-cluster images cluster cluster-down clean help

all: build

help: ## list the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 16

deps-build: ## install what building needs (Debian packages)
	@hack/install-deps.sh build

deps-cluster: ## install what running a cluster needs (containerd, runc, CNI plugins, iptables, busybox)
	@hack/install-deps.sh build cluster

prepare: deps-build ## apply patches/ to pristine module copies ($(OUT)/src, $(OUT)/go.work)
	$(K1M_BUILD) prepare $(K1M_FLAGS)

build: deps-build ## build k1m and the patched components into $(OUT)/bin
	$(K1M_BUILD) build --flavor k1m $(K1M_FLAGS)

build-stock: deps-build ## build the same components, unpatched, into $(OUT)/stock/bin
	$(K1M_BUILD) build --flavor stock $(K1M_FLAGS)

images: deps-cluster ## build the image archives nodes import (pause, CoreDNS, busybox) into $(OUT)/images
	$(LOW) $(K1M_BUILD) images $(K1M_FLAGS)

build-k1m: build

# The local cluster harness (test/cmd/k1m-cluster, test/localcluster), built
# rather than go run: go run turns every exit code into 1.
K1M_CLUSTER       = $(OUT)/tools/k1m-cluster
BUILD_K1M_CLUSTER = CGO_ENABLED=0 $(GO) build -o $(K1M_CLUSTER) ./test/cmd/k1m-cluster

cluster: deps-cluster build-$(FLAVOR) images ## start a local cluster: k1m server (+ NODES-1 agents in network namespaces); SERVERS=n: n servers, each in its own namespace and memory cgroup (NODES counts them); FLAVOR=stock for the unpatched build
	$(BUILD_K1M_CLUSTER)
	SERVERS=$(SERVERS) NODES=$(NODES) K1M=$(K1M_BIN) CLUSTER_DIR=$(OUT)/cluster IMAGES_DIR=$(OUT)/images $(K1M_CLUSTER) up

cluster-down: ## stop the local cluster: no process, mount, netns, cgroup or iptables rule is left (data is kept)
	$(BUILD_K1M_CLUSTER)
	K1M=$(K1M_BIN) CLUSTER_DIR=$(OUT)/cluster $(K1M_CLUSTER) down

deps-conformance: ## install what building the conformance test images needs (debootstrap)
	@hack/install-deps.sh build cluster conformance

conformance-images: deps-conformance images ## build e2e.test, ginkgo, the conformance image and every test image into $(OUT)/conformance
	$(LOW) $(K1M_BUILD) conformance $(K1M_FLAGS)

MODE             ?= quick
CONFORMANCE_ARGS ?=
KUBECONFIG_K1M   ?= /var/lib/k1m/server/admin.kubeconfig
CONFORMANCE       = $(OUT)/conformance/bin/k1m-conformance run --kubeconfig $(KUBECONFIG_K1M) \
	--repo-list $(OUT)/conformance/repo-list.yaml --out $(OUT)/conformance/results

conformance: conformance-images ## run the suite as Sonobuoy does against the running make cluster: MODE=quick|non-disruptive-conformance|certified-conformance|k1m-curated
	$(BUILD_K1M_CLUSTER)
	K1M=$(K1M_BIN) CLUSTER_DIR=$(OUT)/cluster $(K1M_CLUSTER) import $(OUT)/conformance/images
	$(CONFORMANCE) --mode $(MODE) $(CONFORMANCE_ARGS)

conformance-test: deps-cluster build images conformance-images ## make test's part: 3 servers + 2 agents, MODE=quick then the curated specs, then down
	hack/conformance-test.sh

deps-kind: ## install what kind images and clusters need (docker.io, debootstrap, the cluster packages)
	@hack/install-deps.sh build cluster conformance kind

KIND_ENV = KIND=$(OUT)/kind/bin/kind OUT=$(OUT) DOCKER_DIR=$(OUT)/docker

kind-tools: deps-kind build ## build the kind CLI, k1m-docker-runc, k1m-cni, etcd and crictl into $(OUT)/kind/bin
	$(LOW) $(K1M_BUILD) kind-tools $(K1M_FLAGS)

kind-image: deps-kind build images kind-tools ## build the kind base and node images offline (k1m.local/kind-node) and load them into Docker; cached by inputs
	DOCKER_DIR=$(OUT)/docker hack/docker.sh up $(OUT)/kind/bin/k1m-docker-runc
	$(K1M_BUILD) kind-image $(K1M_FLAGS)

kind-up: kind-image ## a kind cluster from the node image: 1 control plane + 2 workers, IPv6 only (manifests/kind/cluster.yaml)
	$(KIND_ENV) hack/kind.sh up

kind-down: ## delete the kind cluster and its network; PURGE=1 also removes k1m's kind images and the dockerd k1m started
	$(KIND_ENV) PURGE=$(PURGE) hack/kind.sh down

kind-test: kind-image ## a fresh kind cluster checked through the API (test/kind), then down
	$(KIND_ENV) hack/kind.sh test

kind-conformance: kind-image conformance-images ## a fresh kind cluster, Sonobuoy's quick mode in it, then down (by hand: make conformance-test runs the runner in make test)
	$(KIND_ENV) hack/kind.sh conformance-test

verify: verify-tree test-patched verify-stock ## pins, patch headers, series applies, codegen, gofmt/vet of both flavours, docs against code, tests of patched packages

verify-tree: deps-build ## pins, patch headers, series applies, codegen, gofmt/vet against the patched tree, docs against code
	$(K1M_BUILD) verify $(K1M_FLAGS)
	hack/verify-go.sh k1m

test-patched: deps-build ## the upstream tests of the packages the series touches, on the patched tree
	$(K1M_BUILD) test-patched $(K1M_FLAGS)

verify-stock: deps-build ## the product built and vetted in the stock flavour
	$(LOW) hack/verify-go.sh stock

unit: deps-build ## unit tests of k1m's own code, built against the patched tree
	$(K1M_BUILD) go --flavor k1m $(K1M_FLAGS) test ./pkg/... ./cmd/... ./manifests/... ./conformance/... ./bench/... ./build/... ./test/localcluster/... ./test/faults/... ./test/runcshim/... ./test/cmd/... ./test/clustercheck/...

integration: deps-cluster build images ## start a 3-node cluster from the built binary and check it through the API (test/integration)
	$(K1M_BUILD) go --flavor k1m $(K1M_FLAGS) test -count=1 -timeout 30m -v ./test/integration/

# The fault campaign (test/faults, docs/ha.md#the-fault-campaign): SCENARIOS is
# a comma-separated list of its scenarios, all or ci; REPEAT runs each that
# many times; PARTITIONS makes the cluster with those store partitions
# (--etcd-partitions; not with the upgrade scenario); FAULTS_DOCS=1 writes
# the table into docs/ha.md.
SCENARIOS   ?= all
REPEAT      ?= 1
PARTITIONS  ?=
FAULTS_DOCS ?=
# FAULTS_TIMEOUT bounds the run (go test -timeout; the campaign ends its
# scenarios 2 min before it, to take the cluster down): make test's parts
# have their shares of CI's time.
FAULTS_TIMEOUT ?= 90m
FAULTS      = K1M_FAULTS=1 FAULTS_REPEAT=$(REPEAT) FAULTS_DOCS=$(FAULTS_DOCS) FAULTS_PARTITIONS=$(PARTITIONS) \
	$(K1M_BUILD) go --flavor k1m $(K1M_FLAGS) test -count=1 -timeout $(FAULTS_TIMEOUT) -v -run '^TestFaults$$' ./test/faults/

faults: deps-cluster build images ## the fault campaign on 3 servers + 2 agents: SCENARIOS=a,b|all|ci, REPEAT=n, PARTITIONS=pods,nodes (the store partitioned), FAULTS_DOCS=1 keeps the table in docs/ha.md
	FAULTS_SCENARIOS=$(SCENARIOS) $(FAULTS)

faults-test: FAULTS_TIMEOUT = 20m
faults-test: deps-cluster build images ## the fault campaign's CI subset (SCENARIOS=ci) on a fresh cluster, within 20 min; make test runs it after the upgrade (upgrade-test)
	FAULTS_SCENARIOS=ci $(FAULTS)

# The rolling upgrade (docs/operations.md#upgrades): UPGRADE_FROM is the
# earlier release, a commit or tag of this repository; the default is the
# release tagged v1.32.5+k1m.5fe805146d33, which packages no component.
# UPGRADE_VIA is the release in between, the first the test's replicated
# database runs on: the default, v1.32.5+k1m.a4585a7ee4f9, packages
# local-path, metrics-server and NetworkPolicy enforcement. It runs on this
# tree's images, so it must package the same image tags.
UPGRADE_FROM ?= 5fe805146d33a53725c73c0fa31e894fa4498f3b
UPGRADE_VIA  ?= a4585a7ee4f9c3dcdf1b909b6c009f2e51fe6a81

earlier-release: deps-build ## build the earlier releases UPGRADE_FROM and UPGRADE_VIA into $(OUT)/upgrade-from and $(OUT)/upgrade-via (kept by commit in K1M_CACHE_DIR)
	$(LOW) sh -c 'hack/earlier-release.sh $(UPGRADE_FROM) $(OUT)/upgrade-from UPGRADE_FROM && \
	  hack/earlier-release.sh $(UPGRADE_VIA) $(OUT)/upgrade-via UPGRADE_VIA'

upgrade-test: FAULTS_TIMEOUT = 25m
upgrade-test: deps-cluster build images conformance-images earlier-release ## make test's part: the rolling upgrade from UPGRADE_FROM through UPGRADE_VIA to this tree on 3 servers + 2 agents, writes flowing, a replicated database on persistent volumes through the second, then the fault campaign's CI subset on the upgraded cluster, within 25 min
	FAULTS_SCENARIOS=upgrade,ci FAULTS_FROM_K1M=$(abspath $(OUT))/upgrade-from/_output/bin/k1m \
	FAULTS_VIA_K1M=$(abspath $(OUT))/upgrade-via/_output/bin/k1m \
	FAULTS_DATABASE_IMAGE=$(abspath $(OUT))/conformance/database/etcd.tar $(FAULTS)

# make test in two lanes (docs/build.md#make-test-in-two-lanes). The checks
# lane runs every check in order at normal priority (unit and test-patched
# side by side: their tests mostly wait); beside it, the builds lane builds
# what only later checks need (the images, the stock flavour, the
# conformance images, the earlier release, the kind tools) at the lowest
# CPU priority, each with its output in $(OUT)/builds-lane/: they take only
# the CPU the checks leave idle, and a check waits only when the build it
# needs is not done yet. Warm, every build is a cache hit. The extra
# prerequisites below exist only in the lanes' make (K1M_LANES).
test: deps-kind ## the test command (README.md); CI runs exactly this: verify + unit + integration + upgrade-test + conformance-test + kind-test + release-test, in two lanes
	$(MAKE) --no-print-directory -j3 K1M_LANES=1 test-checks test-builds

LOW =
ifeq ($(K1M_LANES),1)
LOW = hack/builds-lane.sh $@ $(OUT)/builds-lane/$@.log
# The checks lane, in this order. The patched tree is prepared first: the
# builds lane's k1m-flavour steps come after build.
test-checks: release-test
verify-tree: prepare
unit: verify-tree
test-patched: verify-tree
build: unit test-patched
upgrade-test: integration earlier-release
conformance-test: upgrade-test conformance-images
kind-image: conformance-test kind-tools
release: kind-test
# The builds lane, in this order: the earlier release and the kind tools
# after build, whose compiled packages they reuse.
test-builds: kind-tools
verify-stock: images
conformance-images: verify-stock
earlier-release: build conformance-images
kind-tools: earlier-release
endif

.PHONY: verify-tree test-patched verify-stock kind-tools earlier-release test-checks test-builds

.PHONY: release release-test

release: build images ## the release in $(OUT)/release (k1m, images/, install.sh, sha256sum.txt) and as one tarball: installs with no Go or source tree (docs/install.md)
	OUT=$(OUT) hack/release.sh build

release-test: release kind-image ## install the release as a systemd service in a kind-base container: node Ready, uninstall leaves nothing; a corrupt release refused (test/release)
	OUT=$(OUT) hack/release.sh test

BENCH_ARGS ?=
# bench-tools puts the plotter here.
BENCH_TOOLS = --benchplot $(OUT)/tools/benchplot
BENCH       = $(K1M_BUILD) go --flavor k1m $(K1M_FLAGS) build -o $(OUT)/tools/k1m-bench ./bench/cmd/k1m-bench && \
	$(OUT)/tools/k1m-bench run --out $(OUT) $(BENCH_TOOLS)

bench-tools: deps-build ## build what the benchmark runs besides k1m and stock (the plotter bench/cmd/benchplot) into $(OUT)/tools
	$(K1M_BUILD) bench-tools $(K1M_FLAGS)

bench: deps-build build build-stock bench-tools ## stock 1.32.5 vs k1m side by side, about 10 min measured (docs/build.md); results in $(OUT)/bench
	$(BENCH) --profile quick $(BENCH_ARGS)

bench-full: deps-build build build-stock bench-tools ## the same with more rounds, longer windows and a node ramp up to 100k nodes
	$(BENCH) --profile full $(BENCH_ARGS)

clean: ## remove generated trees and binaries
	rm -rf $(OUT)
