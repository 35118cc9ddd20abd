# seckill-operator — a Kubernetes operator for flash sales.
# Kubebuilder-style verbs; tools pinned into ./bin from the Go module proxy.

IMG ?= seckill-operator:dev
CONTROLLER_GEN_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION ?= v2.15.0
LOCALBIN ?= $(CURDIR)/bin
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint
GO_TEST_FLAGS ?= -count=1 -timeout 30m
# One build configuration for every go command run from here — the tests, the
# image's static binaries, the demos, the tools — so that each package compiles
# once into one build cache (cgo on for some commands and off for others made
# a cold `make demo` compile the project twice). Nothing here needs cgo.
export CGO_ENABLED = 0

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  %-16s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate the CRD and RBAC from the markers.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="./..." output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	cp config/crd/bases/*.yaml charts/seckill-operator/crds/
	cp config/rbac/role.yaml charts/seckill-operator/files/manager-role.yaml

.PHONY: generate
generate: controller-gen ## Generate DeepCopy methods.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: fmt
fmt: ## gofmt the code.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## go vet.
	go vet ./...

.PHONY: lint
lint: golangci-lint ## golangci-lint with the set in .golangci.yml.
	$(GOLANGCI_LINT) run ./...

.PHONY: verify
verify: manifests generate ## Fail when generated code or formatting is stale.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	@git diff --exit-code -- api config charts || { echo "generated files are stale: run make generate manifests"; exit 1; }
	@hack/check-tracked.sh

.PHONY: test
test: manifests generate ## Every test on the real local stack, then the README's process mode (make docs-check), the fault matrix at a small count (make chaos CHAOS_CYCLES=3) and the sale on the real cluster (make e2e).
	hack/stack.sh up --k8s-background  # a first Kubernetes build runs beside vet and the tests, at idle priority
	go vet ./...
	go test $(GO_TEST_FLAGS) ./...
	$(MAKE) docs-check
	$(MAKE) chaos CHAOS_CYCLES=3 CHAOS_AFTER=5s
	$(MAKE) e2e

.PHONY: test-unit
test-unit: ## Every test that needs no server, in well under a minute with a warm build cache: go test -short (the tests that reach the stack or envtest skip).
	go test -short -count=1 ./...

.PHONY: docs-check
docs-check: ## Run the README's "Run the workloads by hand" blocks literally on the stack and reach every GET answer of its table.
	hack/stack.sh up --no-envtest
	SECKILL_DOCS_CHECK=1 go test -count=1 -v -timeout 15m ./test/readme

##@ Local stack

.PHONY: stack-up
stack-up: ## Install and start PostgreSQL, Redis, RocketMQ 5 and envtest assets (idempotent).
	hack/stack.sh up

.PHONY: stack-down
stack-down: ## Stop what stack-up started.
	hack/stack.sh down

.PHONY: stack-test
stack-test: ## Test hack/stack.sh itself: up twice, up after kill -9 of a component, up under CPU load, down leaves nothing.
	hack/stack-test.sh

.PHONY: stack-status
stack-status: ## Show what is running.
	hack/stack.sh status

.PHONY: cluster-up
cluster-up: stack-up ## Start a real single-node Kubernetes beside the stack (root; builds cached by version).
	hack/cluster.sh up

.PHONY: cluster-down
cluster-down: ## Stop the cluster and undo every host change it made.
	hack/cluster.sh down

.PHONY: cluster-status
cluster-status: ## Show what of the cluster runs.
	hack/cluster.sh status

.PHONY: e2e
e2e: cluster-up ## The sale on the real cluster: chart, activity patched while it runs, scaling, backlog guard, phases to Completed, invariants.
	hack/cluster.sh image
	go build -o .stack/cluster/bin/kubectl-seckill ./cmd/kubectl-seckill
	SECKILL_E2E=1 go test -count=1 -v -timeout 20m ./test/e2e

.PHONY: demo
demo: ## The demo flash sale, run by the operator on a real single-node Kubernetes on this machine (root; a first run builds Kubernetes).
	@$(MAKE) --no-print-directory -j2 stack-up prebuild
	@$(MAKE) --no-print-directory cluster-up
	hack/cluster.sh image
	go build -o .stack/cluster/bin/kubectl-seckill ./cmd/kubectl-seckill
	go run ./hack/clusterdemo

.PHONY: prebuild
prebuild: ## Compile the operator, the workloads and the cluster demo into the build cache (make demo runs it beside the first Kubernetes build).
	nice -n 5 go build . ./workloads/cmd/seckill ./hack/clusterdemo ./hack/image ./hack/forward

.PHONY: demo-processes
demo-processes: ## The quick look: the workloads as processes on the local stack, no Kubernetes.
	hack/stack.sh up --no-envtest
	go run ./hack/demo

##@ Build

.PHONY: build
build: manifests generate ## Build the operator and the workloads binary.
	CGO_ENABLED=0 go build -o bin/seckill-operator .
	CGO_ENABLED=0 go build -o bin/seckill ./workloads/cmd/seckill
	CGO_ENABLED=0 go build -o bin/kubectl-seckill ./cmd/kubectl-seckill

.PHONY: run
run: manifests generate ## Run the operator against the current kubeconfig.
	go run . --metrics-secure=false

.PHONY: docker-build
docker-build: ## Build the container image (needs a Docker engine).
	docker build -t $(IMG) .

##@ Deployment

.PHONY: install
install: manifests ## Install the CRD into the current cluster.
	kubectl apply --server-side -k config/crd

.PHONY: uninstall
uninstall: ## Remove the CRD (and with it every SeckillActivity).
	kubectl delete -k config/crd

.PHONY: deploy
deploy: manifests ## Deploy the operator with kustomize (IMG=...).
	kubectl kustomize config/default | sed 's#image: seckill-operator:dev#image: $(IMG)#' | kubectl apply --server-side -f -

.PHONY: undeploy
undeploy: ## Remove the operator.
	kubectl delete -k config/default

##@ Tools

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN)
$(CONTROLLER_GEN):
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)

.PHONY: golangci-lint
golangci-lint: $(GOLANGCI_LINT)
$(GOLANGCI_LINT):
	GOBIN=$(LOCALBIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

##@ Benchmarks

.PHONY: bench
bench: stack-up ## Reserve Lua and the order transaction next to redis-benchmark's and pgbench's ceilings (medians); the consumer group's orders/s with 1, 2, 4 consumers; broker delivery latency.
	hack/bench-reserve.sh
	hack/bench-order.sh
	go test -run XXX -bench 'ConsumerGroup' -benchtime 3x ./workloads/pipeline
	go test -run XXX -bench 'DeliveryLatency' -benchtime 400x ./workloads/mq

.PHONY: bench-sale
bench-sale: stack-up ## The sale of issue 14 at a fixed arrival rate (RATE, REQUESTS, STOCK, BUCKETS, CONSUMERS, RUNS; FAULT=broker-restart|pg-freeze|kill-consumer, FAULT_FOR; RETRIES: a buyer told 503 sends the same request again): HDR latencies, backlog, table + PNG in .stack/bench-sale, ceilings in the same run.
	go run ./hack/benchsale -rate $${RATE:-1000} -requests $${REQUESTS:-100000} -stock $${STOCK:-10000} -buckets $${BUCKETS:-4} -consumers $${CONSUMERS:-2} -runs $${RUNS:-3} -fault "$${FAULT:-}" -fault-for $${FAULT_FOR:-10s} -retries $${RETRIES:-0}

CHAOS_CYCLES ?= 20
CHAOS_AFTER ?= 15s
.PHONY: chaos
chaos: ## The fault matrix at volume (docs/faults.md): each failpoint's process killed and restarted CHAOS_CYCLES times (default 20) under buyers, COMMIT answers lost on the wire, PostgreSQL frozen and restarted, Redis frozen, the broker restarted, random SIGKILLs; the invariant checker after each; a table, exit 1 on a violation (CHAOS_ONLY=a,b for some).
	hack/stack.sh up --no-envtest
	go run ./hack/chaos -cycles $(CHAOS_CYCLES) -after $(CHAOS_AFTER) $(if $(CHAOS_ONLY),-only $(CHAOS_ONLY))

.PHONY: chaos-full
chaos-full: ## make chaos at 200 cycles per failpoint (design.md#failpoints: hundreds of times), a minute of recovery after each scenario.
	$(MAKE) chaos CHAOS_CYCLES=200 CHAOS_AFTER=60s

.PHONY: chaos-mutants
chaos-mutants: ## The tests can fail: each protection (inbox first, commit verification, the Lua marker, the compensation CAS, the CANCEL_PENDING guard, the final stock guard) removed in turn; its test must fail (hack/chaos-mutants.sh).
	hack/stack.sh up --no-envtest
	hack/chaos-mutants.sh

.PHONY: race
race: stack-up ## Payments racing the timeout cancel, thousands of times (SECKILL_RACE_ITERATIONS, default 5000).
	SECKILL_RACE_ITERATIONS=$${SECKILL_RACE_ITERATIONS:-5000} go test -count=1 -run TestPaymentRacesTimeoutCancel -v ./workloads/cancel
