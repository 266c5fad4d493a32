# Every target a newcomer or CI needs; see README.md.
SHELL := /usr/bin/env bash
CONTROLLER_GEN_VERSION := v0.20.1
BIN := $(CURDIR)/bin
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
OCM_API_CRDS := cluster/v1/0000_00_clusters.open-cluster-management.io_managedclusters.crd.yaml \
	cluster/v1beta2/0000_00_clusters.open-cluster-management.io_managedclustersets.crd.yaml \
	cluster/v1beta2/0000_01_clusters.open-cluster-management.io_managedclustersetbindings.crd.yaml \
	cluster/v1beta1/0000_02_clusters.open-cluster-management.io_placements.crd.yaml \
	cluster/v1beta1/0000_03_clusters.open-cluster-management.io_placementdecisions.crd.yaml \
	cluster/v1alpha1/0000_05_clusters.open-cluster-management.io_addonplacementscores.crd.yaml \
	addon/v1beta1/0000_00_addon.open-cluster-management.io_clustermanagementaddons.crd.yaml \
	addon/v1beta1/0000_01_addon.open-cluster-management.io_managedclusteraddons.crd.yaml \
	addon/v1beta1/0000_02_addon.open-cluster-management.io_addondeploymentconfigs.crd.yaml \
	work/v1/0000_00_work.open-cluster-management.io_manifestworks.crd.yaml

.PHONY: all build generate verify-generate testbin test quickstart fmt vet

all: build

build:
	go build -o $(BIN)/regent ./cmd/regent

$(CONTROLLER_GEN):
	GOBIN=$(BIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(BIN)/controller-gen $@

# deepcopy and CRD YAML come from the markers in api/; OCM's CRDs are copied from the pinned
# open-cluster-management.io/api module so the fleet can embed them.
generate: $(CONTROLLER_GEN)
	$(CONTROLLER_GEN) object paths=./api/...
	rm -f api/crds/*.yaml
	$(CONTROLLER_GEN) crd:crdVersions=v1,generateEmbeddedObjectMeta=true paths=./api/... output:crd:artifacts:config=api/crds
	rm -rf api/crds/ocm && mkdir -p api/crds/ocm
	dir=$$(go list -m -f '{{.Dir}}' open-cluster-management.io/api) && \
	  for f in $(OCM_API_CRDS); do cp "$$dir/$$f" api/crds/ocm/; done && chmod 0644 api/crds/ocm/*.yaml

verify-generate: generate
	@git diff --exit-code -- api || { echo "generated files are stale: run 'make generate' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api)" || { git status --porcelain -- api; echo "generated files are untracked or stale: run 'make generate' and commit"; exit 1; }

testbin:
	bash hack/testbin.sh

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); test -z "$$out" || { echo "gofmt needed:"; echo "$$out"; exit 1; }

vet:
	go vet ./...

# Integration tests start real kube-apiservers; packages run in parallel, two at a time on 2 cores.
test: testbin
	REGENT_TESTBIN=$$(bash hack/testbin.sh --print-dir) go test -p 2 -timeout 25m ./...

quickstart: testbin build
	$(BIN)/regent quickstart
