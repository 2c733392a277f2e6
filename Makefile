# memcached-operator

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

ROOT := $(shell pwd)
BIN_DIR := $(ROOT)/bin
# KUBE_VERSION=v1.30.14 (one of hack/versions.env's KUBE_COMPAT_VERSIONS) runs
# that Kubernetes version instead of the default, the newest: its programs
# are in bin/k8s/v1.30.14 (hack/kube-version.sh).
DEFAULT_KUBE_VERSION := $(shell sed -n 's/^KUBE_VERSION=//p' hack/versions.env)
KUBE_VERSION ?= $(DEFAULT_KUBE_VERSION)
export KUBE_VERSION
K8S_BIN := $(BIN_DIR)/k8s$(if $(filter-out $(DEFAULT_KUBE_VERSION),$(KUBE_VERSION)),/$(KUBE_VERSION))
CLUSTER_NAME ?= memcached-operator
export CLUSTER_NAME
# REAL_NODE=1: the local cluster's node is a real one (kubelet, containerd:
# pods run real containers), REAL_NODE=0: fake nodes (kwok). By default a
# real node where the machine can have one: as root on Linux.
REAL_NODE ?= $(shell [ "$$(id -u)" = 0 ] && [ "$$(uname -s)" = Linux ] && echo 1 || echo 0)
export REAL_NODE
# make run builds and starts a real node only for the local cluster, not
# for the cluster of $KUBECONFIG.
RUN_REAL_NODE := $(if $(KUBECONFIG),0,$(REAL_NODE))
LOCAL_KUBECONFIG := $(ROOT)/.local/$(CLUSTER_NAME).kubeconfig
KUBECTL := $(BIN_DIR)/k8s/kubectl
CONTROLLER_GEN := go tool controller-gen
IMG ?= memcached-operator:latest
# The release the Helm chart and the OLM bundle describe (hack/versions.env),
# and the operator image the bundle runs.
VERSION ?= $(shell sed -n 's/^OPERATOR_VERSION=//p' hack/versions.env)
OPERATOR_IMG ?= memcached-operator:$(VERSION)
BUNDLE_IMG ?= memcached-operator-bundle:v$(VERSION)
HELM := $(BIN_DIR)/helm
# The tests need the control-plane binaries: envtest starts etcd and
# kube-apiserver from here, the cluster tests run kwokctl.
export KUBEBUILDER_ASSETS := $(K8S_BIN)
# The project builds with the toolchain go.mod names (go1.27.3), which the go
# command fetches from the module proxy once; a machine's go env may say
# GOTOOLCHAIN=local, which would build with whatever Go is installed. The
# tools modules under hack/tools name none newer than theirs, and build with
# the installed Go, but for govulncheck, which must read go1.27 sources.
export GOTOOLCHAIN := auto
# Static binaries, and one build of each package: the operator's binary,
# go vet, the tests and the programs under hack/ share the packages they
# compile only when built with the same settings (cgo among them), so all of
# them build without cgo (nothing here needs it).
export CGO_ENABLED := 0
GO_TEST_FLAGS ?=
# How many of the end-to-end stories that touch only their own namespaces
# run at once (e2e/main_test.go); the others run one at a time.
E2E_PARALLEL ?= 3
export E2E_PARALLEL

.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: ## Generate deepcopy functions and apply configurations (applyconfig/).
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt applyconfiguration:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./pkg/owned/...

.PHONY: manifests
manifests: ## Generate the CRD (manifests/crd/bases) and the ClusterRole (manifests/rbac) from markers.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=manifests/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=manager paths=./pkg/... output:rbac:artifacts:config=manifests/rbac
	@# The Prometheus Operator's ServiceMonitor and PrometheusRule CRDs, which
	@# tests install: from its API types module, the version go.mod pins.
	@tmp="$$(mktemp -d)" && $(CONTROLLER_GEN) crd:maxDescLen=0 paths=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1 output:crd:artifacts:config="$$tmp" && \
		mkdir -p hack/crds && cp "$$tmp/monitoring.coreos.com_servicemonitors.yaml" "$$tmp/monitoring.coreos.com_prometheusrules.yaml" hack/crds/ && rm -rf "$$tmp"

.PHONY: fmt
fmt: ## Run gofmt on the code.
	gofmt -l -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet.
	go vet ./...
	go vet -tags integration ./...
	go vet -tags e2e ./e2e/...

.PHONY: lint
lint: ## Check formatting and run go vet (gofmt -l must print nothing).
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "not gofmt-ed:"; echo "$$out"; exit 1; fi
	@$(MAKE) --no-print-directory vet

.PHONY: verify
verify: generate manifests chart bundle ## Regenerate everything and fail on any difference, or an untidy go.mod.
	go mod tidy
	@for d in hack/tools/*/; do (cd $$d && go mod tidy); done
	@if [ -n "$$(git status --porcelain -- api applyconfig manifests go.mod go.sum hack/tools hack/crds)" ]; then \
		echo "generated files or go.mod are out of date; run 'make generate manifests' and 'go mod tidy':"; \
		git status --porcelain -- api applyconfig manifests go.mod go.sum hack/tools hack/crds; git diff --stat; exit 1; fi
	@$(MAKE) --no-print-directory lint

.PHONY: test
test: k8s-binaries build clients $(if $(filter 0,$(E2E_REAL_NODE)),,real-node-prerequisites) ## Run all tests: unit, integration (real kube-apiserver, local cluster) and end-to-end (with a real node).
	GO_TEST_FLAGS="$(GO_TEST_FLAGS)" hack/test.sh
	$(if $(filter 0,$(E2E_REAL_NODE)),,$(MAKE) --no-print-directory bench-cache-check)

# The memcached clients no one here wrote that the tests run against the
# discovery endpoint (hack/clients: npm packages pinned by their lock file).
CLIENTS_DIR := $(BIN_DIR)/clients
.PHONY: clients
clients: $(CLIENTS_DIR)/.installed ## Install the memcached clients the tests run (hack/clients, with npm; cached).
$(CLIENTS_DIR)/.installed: hack/clients/package.json hack/clients/package-lock.json
	rm -rf $(CLIENTS_DIR) && mkdir -p $(CLIENTS_DIR)
	cp hack/clients/package.json hack/clients/package-lock.json $(CLIENTS_DIR)/
	cd $(CLIENTS_DIR) && npm ci --no-audit --no-fund --ignore-scripts
	touch $@

.PHONY: test-unit
test-unit: ## Run the unit tests only: no control plane, no cluster, nothing to build first.
	go test $(GO_TEST_FLAGS) ./...

.PHONY: test-integration
test-integration: k8s-binaries build helm clients promtool ## Run the unit and integration tests (real kube-apiserver, local cluster), not the end-to-end suite.
	go test -tags integration $(GO_TEST_FLAGS) ./...

.PHONY: test-e2e
test-e2e: k8s-binaries build helm $(if $(filter 0,$(E2E_REAL_NODE)),,real-node-prerequisites scorecard-prerequisites) ## Run the end-to-end suite (E2E_PROVIDER=local|kind|existing; local by default, with a real node).
	go test -tags e2e -count=1 -timeout 40m -parallel $(E2E_PARALLEL) $(GO_TEST_FLAGS) ./e2e/... $(if $(E2E_ARGS),-args $(E2E_ARGS))

.PHONY: test-compat
test-compat: build helm real-node-prerequisites scorecard-prerequisites ## Run the CRD, controller and install tests, and the container stories, on each older Kubernetes version claimed (hack/test-compat.sh; CONTAINERS=0: control plane only).
	hack/test-compat.sh

FUZZTIME ?= 60s
.PHONY: fuzz
fuzz: k8s-binaries ## Fuzz the builders and the apply-skipping rule against a real kube-apiserver for FUZZTIME (60s) each; finds go to each package's testdata/fuzz.
	go test -tags integration ./pkg/desired -run '^$$' -fuzz FuzzAdmittedSpecGivesAcceptedDeployment -fuzztime $(FUZZTIME) -fuzzminimizetime 100x
	go test -tags integration ./pkg/owned -run '^$$' -fuzz FuzzRecordedObjectAppliesNothing -fuzztime $(FUZZTIME) -fuzzminimizetime 100x

.PHONY: bench-check
GOVULNCHECK := $(BIN_DIR)/govulncheck
VULNDB := $(BIN_DIR)/vulndb
$(GOVULNCHECK): hack/tools/vuln/go.mod hack/tools/vuln/go.sum
	cd hack/tools/vuln && CGO_ENABLED=0 go build -trimpath -o $(GOVULNCHECK) golang.org/x/vuln/cmd/govulncheck
# The database, built from the advisories of the golang.org/x/vulndb version
# that hack/tools/vuln pins: no network, and the same answer on every machine.
$(VULNDB)/index/db.json: hack/tools/vuln/go.mod hack/tools/vuln/go.sum
	cd hack/tools/vuln && go build -o $(BIN_DIR)/indexdb golang.org/x/vulndb/cmd/indexdb
	rm -rf $(VULNDB)
	$(BIN_DIR)/indexdb -vulns "$$(cd hack/tools/vuln && go list -m -f '{{.Dir}}' golang.org/x/vulndb)/data/osv" -out $(VULNDB)

GREMLINS := $(BIN_DIR)/gremlins
$(GREMLINS): hack/tools/mutation/go.mod hack/tools/mutation/go.sum
	cd hack/tools/mutation && CGO_ENABLED=0 go build -trimpath -o $(GREMLINS) github.com/go-gremlins/gremlins/cmd/gremlins

# operator-sdk and its scorecard, from the module hack/tools/scorecard pins
# (cgo off, and the OpenPGP of Go instead of gpgme, as the module builds them).
OPERATOR_SDK := $(BIN_DIR)/operator-sdk
SDK_VERSION = $(shell sed -n 's|^require github.com/operator-framework/operator-sdk ||p' hack/tools/scorecard/go.mod)
$(OPERATOR_SDK): hack/tools/scorecard/go.mod hack/tools/scorecard/go.sum
	cd hack/tools/scorecard && CGO_ENABLED=0 go build -trimpath -tags containers_image_openpgp \
	  -ldflags "-X github.com/operator-framework/operator-sdk/internal/version.Version=$(SDK_VERSION) -X github.com/operator-framework/operator-sdk/internal/version.GitVersion=$(SDK_VERSION) -X github.com/operator-framework/operator-sdk/internal/version.ImageVersion=$(SDK_VERSION)" \
	  -o $(OPERATOR_SDK) github.com/operator-framework/operator-sdk/cmd/operator-sdk

# What the scorecard needs beside a cluster with a real node: make test's
# end-to-end suite runs it.
.PHONY: scorecard-prerequisites
scorecard-prerequisites: $(OPERATOR_SDK) scorecard-images

.PHONY: scorecard
scorecard: scorecard-prerequisites k8s-binaries ## Run operator-sdk scorecard on manifests/bundle (its basic and OLM suites) on the local cluster's real node (hack/scorecard.sh; make cluster-up first).
	hack/scorecard.sh

# promtool, from the module hack/tools/promtool pins: make test checks and
# unit-tests the alerting rules with it (manifests/prometheus).
PROMTOOL := $(BIN_DIR)/promtool
.PHONY: promtool
promtool: $(PROMTOOL) ## Build promtool (bin/promtool) from its Go module, for the alerting rules' tests.
$(PROMTOOL): hack/tools/promtool/go.mod hack/tools/promtool/go.sum
	cd hack/tools/promtool && CGO_ENABLED=0 go build -trimpath -o $(PROMTOOL) github.com/prometheus/prometheus/cmd/promtool

# The packages whose tests need no cluster (memcached on the host at most).
MUTATION_PKGS ?= ring move status desired material discovery warm reload settings podlog
.PHONY: mutation
mutation: $(GREMLINS) ## Mutation-test the packages whose tests need no cluster (gremlins, MUTATION_PKGS=...); fails below 85% efficacy in any (docs/reliability.md).
	hack/mutation.sh $(MUTATION_PKGS)

.PHONY: broken-once
broken-once: k8s-binaries ## Break the product once for each entry of docs/reliability.md that hack/brokenonce lists, check that its test fails, and print what it failed with (BROKEN_ONCE_RUN=<regexp of test names> for some).
	go run ./hack/brokenonce -why $(if $(BROKEN_ONCE_RUN),-run '$(BROKEN_ONCE_RUN)')

.PHONY: vulncheck
# The programs the operator image ships, built as the Dockerfile builds
# them (its toolchain: go.mod's, which GOTOOLCHAIN enforces there too).
RELEASE_DIR := $(BIN_DIR)/release
vulncheck: $(GOVULNCHECK) $(VULNDB)/index/db.json ## Fail on a known vulnerability the operator's programs reach, in their source and in the binaries the image ships, that hack/vuln-accepted.txt does not accept with a reason (govulncheck, offline database).
	go run ./hack/vulncheck -govulncheck $(GOVULNCHECK) -db $(VULNDB) -accepted hack/vuln-accepted.txt ./cmd/...
	mkdir -p $(RELEASE_DIR)
	go build -trimpath -o $(RELEASE_DIR)/ $$(sed -n 's|^RUN CGO_ENABLED=0 go build -trimpath -o bin/ \(.*\) &&.*$$|\1|p' Dockerfile)
	go run ./hack/vulncheck -binary -govulncheck $(GOVULNCHECK) -db $(VULNDB) -accepted hack/vuln-accepted.txt \
		$(RELEASE_DIR)/cmd $(RELEASE_DIR)/reloader $(RELEASE_DIR)/discovery $(RELEASE_DIR)/warm

bench-check: k8s-binaries build ## A small benchmark (20 Memcacheds, no baseline) that fails when a hard promise breaks: any 409, any request at rest.
	go run ./hack/bench -n 20 -skip-baseline -steady 15s -sync-period 5s

.PHONY: bench-cache-check
bench-cache-check: k8s-binaries build real-node-prerequisites ## A short run of bench-cache on the real node that fails when a goal other than speed is missed: a client-visible error, a key lost where the pods stayed as they were.
	go run ./hack/bench-cache -short

BENCH_N ?= 100,1000
.PHONY: bench
bench: k8s-binaries build ## Measure what the operator costs the apiserver (BENCH_N=100,1000; PROFILE=1 for pprof; BENCH_ARGS=-unrelated=10000).
	go run ./hack/bench -n $(BENCH_N) -out docs/benchmarks.md $(if $(PROFILE),-profile) $(BENCH_ARGS)

.PHONY: bench-autoscale
bench-autoscale: k8s-binaries build real-node-prerequisites ## Compare spec.autoscaling with a size right for the peak and an HPA on CPU at 80%, on the real node (as root, about 16 minutes): hit ratio and size over time, written to docs/benchmarks-autoscale.md and its plot.
	go run ./hack/bench-cache -autoscale -out docs/benchmarks-autoscale.md $(BENCH_AUTOSCALE_ARGS)

.PHONY: bench-cache
bench-cache: k8s-binaries build real-node-prerequisites ## Measure the cache as a client sees it, on the real node (as root): throughput and latency against memcached on the host, keys kept through operations (BENCH_CACHE_ARGS=-duration=60s).
	go run ./hack/bench-cache -out docs/benchmarks-cache.md $(BENCH_CACHE_ARGS)

##@ Packaging

.PHONY: chart
chart: k8s-binaries ## Write the Helm chart (manifests/charts/memcached-operator, VERSION) from manifests/default.
	go run ./hack/packaging -only chart -version $(VERSION)

.PHONY: bundle
bundle: k8s-binaries ## Write the OLM bundle (manifests/bundle, VERSION, OPERATOR_IMG) from manifests/default and validate it.
	go run ./hack/packaging -only bundle -version $(VERSION) -image $(OPERATOR_IMG)
	go test -count=1 -run 'TestBundle' ./hack/packaging

.PHONY: bundle-build
bundle-build: ## Build the OLM bundle image $(BUNDLE_IMG) from manifests/bundle (FROM scratch: no registry needed; cached in bin/images).
	BUNDLE_IMG=$(BUNDLE_IMG) hack/images.sh bundle

.PHONY: helm
helm: $(HELM) ## Build Helm (bin/helm) from its Go module, for the chart's tests.

$(HELM): hack/tools/helm/go.mod hack/tools/helm/go.sum
	cd hack/tools/helm && CGO_ENABLED=0 go build -trimpath -o $(HELM) helm.sh/helm/v4/cmd/helm

##@ Local cluster

.PHONY: k8s-binaries
k8s-binaries: ## Build the local control plane into bin/k8s (KUBE_VERSION: another version's, into bin/k8s/KUBE_VERSION; cached: only what changed is rebuilt).
	hack/build-cluster.sh

.PHONY: cluster-up
cluster-up: k8s-binaries $(if $(filter 1,$(REAL_NODE)),real-node-prerequisites) ## Create the local cluster (idempotent; a real node as root on Linux, REAL_NODE=0 for fake nodes only); kubeconfig in .local/$(CLUSTER_NAME).kubeconfig.
	hack/cluster.sh up

.PHONY: node-packages
node-packages: ## Install the Debian packages the real node needs (containerd, runc, CNI plugins, Docker engine, ...), when missing.
	hack/install-node-packages.sh

.PHONY: node-binaries
node-binaries: ## Build the real node's kubelet, kube-proxy (the control plane's version), CoreDNS and kube-router into bin/k8s (cached).
	hack/build-cluster.sh node

.PHONY: images
images: node-packages ## Build the real node's images offline into bin/images: pause, memcached, busybox, the exporter, the operator (cached).
	hack/images.sh

.PHONY: scorecard-images
scorecard-images: node-packages ## Build the scorecard's images into bin/images: its test program and the image that unpacks the bundle (cached).
	hack/images.sh scorecard-test scorecard-untar

.PHONY: real-node-prerequisites
real-node-prerequisites: node-packages node-binaries images

.PHONY: cluster-down
cluster-down: ## Delete the local cluster and stop its processes.
	hack/cluster.sh down

##@ Build and run

.PHONY: build
build: ## Build the operator binary into bin/manager.
	go build -o $(BIN_DIR)/manager ./cmd

.PHONY: run
run: build k8s-binaries $(if $(filter 1,$(RUN_REAL_NODE)),real-node-prerequisites) ## Run the operator from source on $KUBECONFIG, or on the local cluster (created if needed; with a real node as root on Linux, REAL_NODE=0: fake nodes).
	REAL_NODE=$(RUN_REAL_NODE) hack/run.sh

.PHONY: install
install: k8s-binaries ## Install the CRD into the cluster of $KUBECONFIG (the local cluster if unset).
	$(KUBECTL) --kubeconfig "$${KUBECONFIG:-$(LOCAL_KUBECONFIG)}" apply --server-side -f manifests/crd/bases

.PHONY: uninstall
uninstall: k8s-binaries ## Remove the CRD (and with it every Memcached) from the cluster of $KUBECONFIG.
	$(KUBECTL) --kubeconfig "$${KUBECONFIG:-$(LOCAL_KUBECONFIG)}" delete --ignore-not-found -f manifests/crd/bases

.PHONY: deploy
deploy: k8s-binaries ## Install the operator in-cluster (kubectl apply -k manifests/default, image $IMG) on $KUBECONFIG's cluster.
	@if [ -z "$${KUBECONFIG:-}" ]; then echo "note: the local cluster's pods run no containers: use 'make run' there; deploying anyway"; fi
	$(KUBECTL) kustomize manifests/default | sed 's|image: memcached-operator:latest|image: $(IMG)|' | \
		$(KUBECTL) --kubeconfig "$${KUBECONFIG:-$(LOCAL_KUBECONFIG)}" apply --server-side --field-manager=memcached-operator-install -f -

.PHONY: undeploy
undeploy: k8s-binaries ## Remove the in-cluster operator, its CRD and every Memcached from $KUBECONFIG's cluster.
	$(KUBECTL) kustomize manifests/default | $(KUBECTL) --kubeconfig "$${KUBECONFIG:-$(LOCAL_KUBECONFIG)}" delete --ignore-not-found -f -

.PHONY: build-installer
build-installer: k8s-binaries ## Write dist/install.yaml: the whole install bundle in one file (image $IMG), for GitOps repositories.
	mkdir -p dist
	$(KUBECTL) kustomize manifests/default | sed 's|image: memcached-operator:latest|image: $(IMG)|' > dist/install.yaml
	@echo "wrote dist/install.yaml"

.PHONY: docker-build
docker-build: ## Build the operator image $IMG with Docker (needs a Docker engine).
	@command -v docker >/dev/null || { echo "docker is not installed" >&2; exit 1; }
	docker build -t $(IMG) .
