# runtimectl — `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/runtimectl/runtimectl/cli.Version=$(VERSION) -X main.version=$(VERSION)
BASE ?= debian:bookworm-slim
DEMO ?= demo
export TESTCONTAINERS_RYUK_DISABLED := true

.PHONY: help build agent base-image images demo test test-deps test-short test-python test-kernels fuzz soak bench lint fmt tidy-check clean kube-bin kube-up kube-down

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

# bin/runtimectl is the lean build (no Kubernetes backend: client-go's package init is two thirds
# of a command's start); it runs bin/runtimectl-kube, the whole CLI, for whatever needs a cluster.
build: ## build bin/runtimectl (lean) and bin/runtimectl-kube, bin/runtime-agent and bin/runtime-egress (static, linux)
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -tags lean -ldflags '$(LDFLAGS)' -o bin/runtimectl ./cmd/runtimectl
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -ldflags '$(LDFLAGS)' -o bin/runtimectl-kube ./cmd/runtimectl
	CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -buildvcs=false -ldflags '-s -w' -o bin/runtime-agent ./cmd/runtime-agent
	CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -buildvcs=false -ldflags '-s -w' -o bin/runtime-egress ./cmd/runtime-egress

base-image: ## make sure $(BASE) exists locally: present, pulled, or made with debootstrap from Debian's packages
	bash scripts/base-image.sh $(BASE)

images: build base-image ## build the python, bash and node session images
	bin/runtimectl image build all

demo: images ## the main job: build the images, start a session, run code in it
	bin/runtimectl session start $(DEMO)
	bin/runtimectl session exec $(DEMO) 'import pandas as pd; df = pd.DataFrame({"a": [1, 2, 3]}); print("df built")'
	bin/runtimectl session exec $(DEMO) 'df.a.sum()'
	bin/runtimectl session ls
	@echo "the session '$(DEMO)' is running: try bin/runtimectl session exec $(DEMO) 'df'; remove it with bin/runtimectl session rm $(DEMO) --force"

test-deps: ## check for, and as root on Debian install, every package the tests use (scripts/test-deps.sh)
	bash scripts/test-deps.sh

test: test-deps images kube-bin ## set up what the tests need, lint, then every test, unit and integration (builds the images from the Dockerfiles)
	$(MAKE) lint
	$(GO) test -count=1 -timeout 40m ./...
	$(MAKE) fuzz FUZZTIME=30000x
	$(MAKE) test-kernels
	$(MAKE) test-python

test-kernels: ## the interpreter drivers' own tests, each speaking the kernel protocol to its driver (bash with the host's bash 5, python and node in containers of their images' packages)
	python3 kernels/bash/test_kernel.py
	sh kernels/python/run_tests.sh
	sh kernels/node/run_tests.sh

test-python: images ## the Python client's tests (pytest) against a real `runtimectl serve`; installs Debian's python3-pytest when missing
	bash scripts/pytest.sh

test-short: ## unit tests only, no Docker
	$(GO) test -short -count=1 ./...

# FUZZTIME is a duration (2m) or a number of inputs (30000x). `make test` counts inputs: with a
# duration, Go's fuzzer can fail a healthy target with "context deadline exceeded" when the
# deadline falls while a worker is busy on a loaded machine.
FUZZTIME ?= 2m
fuzz: ## run every fuzz target for FUZZTIME each (make test: 30000 inputs each)
	@set -e; out=$$(mktemp); trap 'rm -f $$out' EXIT; \
	for pkg in ./execproto ./agent ./history ./snapshot ./mcpserver ./egress ./egress/proxy; do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$t"; \
	    $(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) $$pkg >$$out 2>&1 || { tail -40 $$out; exit 1; }; \
	  done; \
	done; echo "fuzz: all targets passed"

soak: base-image ## the long tests: repeated docker kill during executions and snapshots; serve under 20 tokens x 10 sessions x 2,000 executions
	RUNTIMECTL_SOAK=200 $(GO) test -count=1 -timeout 60m -run TestSoak ./session/
	RUNTIMECTL_LOAD=20x10x2000 $(GO) test -count=1 -timeout 60m -run TestServeLoad -v ./server/

bench: build base-image ## the benchmarks side by side; writes bench/results.json
	$(GO) run ./bench/cmd/benchrun -out bench/results.json

lint: tidy-check ## go vet, gofmt, and go.mod tidy
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)

fmt: ## gofmt the tree
	gofmt -w $$(git ls-files '*.go')

tidy-check: ## go.mod and go.sum are tidy (changes nothing; prints what tidy would change)
	@$(GO) mod tidy -diff || { echo "go.mod or go.sum is not tidy: run go mod tidy"; exit 1; }

# The session images as `runtimectl image build` tags them (RUNTIMECTL_IMAGE_TAG, else latest).
KUBE_IMAGES ?= $(foreach l,python bash node,runtimectl/$(l):$(or $(RUNTIMECTL_IMAGE_TAG),latest))
kube-bin: ## build the local Kubernetes' binaries once (~12 min cold on 2 cores, cached in ~/.cache/kube-local; seconds when built)
	bash scripts/kube/build.sh

kube-up: images ## a local single-node Kubernetes (built once, ~8 min cold), the session images imported into it
	bash scripts/kube/up.sh
	bash scripts/kube/import.sh $(KUBE_IMAGES)
	@echo "export KUBECONFIG=/var/lib/kube-local/pki/admin.kubeconfig"

kube-down: ## stop the local Kubernetes and restore the host (PURGE=1 also deletes its state and images)
	bash scripts/kube/down.sh

clean: ## remove build outputs
	rm -rf bin
