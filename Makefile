# The habits of this project, in one place. `make test` is the command the
# README gives and .ci/run calls.

GO      ?= go
PKGS    ?= ./...
# Tests that need a service find it (see test/testenv); CI=true makes a
# missing one fail instead of skip. The timeout is a hang guard, not a pace:
# with both cores busy the slowest package (test/testenv, real brokers) took
# 19 of its minutes, so it has room to spare. -pgo=off (here, for vet and
# for the replay tests): default.pgo optimizes the binary, not test
# binaries, and compiling every dependency once more with it made a cold
# `go vet ./...` take 232 s instead of 97. The end-to-end tests still run
# the binary as it ships: test/harness builds it with a plain `go build`.
TESTFLAGS ?= -race -count=1 -timeout 40m -pgo=off

.PHONY: pgo all test test-helm test-k8s helm lint-helm lint-bench test-kafka test-kafka-cluster test-kafka-secure test-interop test-rules lint fmt vet staticcheck bench demo build fuzz clean funclen

all: lint test

# -buildvcs=auto: the commit --version prints (with -dirty for a modified
# tree) is Go's own stamp, there even where GOFLAGS holds -buildvcs=false;
# outside a git checkout there is none, and --version says unknown.
build:
	$(GO) build -buildvcs=auto -o bin/flakestream .

# default.pgo, the CPU profile every `go build` of the binary is optimized
# with (Go's -pgo=auto): the worker draining a JSON backlog at its defaults
# on Apache Kafka, three rounds of scripts/peer-bench, merged. Retake it
# after a change to the hot path (docs/performance.md); a few minutes (2
# on the 2-core machine, builds warm).
pgo:
	@set -e; dir=$$(mktemp -d); \
	scripts/peer-bench --default --modes "flakestream franz-copy" --latency-rate 0 --profile $$dir --out $$dir/run.md; \
	$(GO) tool pprof -proto $$dir/r*-flakestream.cpu.pprof > default.pgo; \
	echo "default.pgo from $$dir (the run: $$dir/run.md)"

test:
	$(GO) test $(TESTFLAGS) -skip '$(SECURE_SKIP)' $(PKGS)
	$(MAKE) test-helm

# The Helm chart (deploy/helm/flakestream): lint, render with the default
# values and with every optional part on, every object decoded strictly
# into its Go type, and the assertions of deploy/helm/*_test.go. Its own
# module (deploy/helm/go.mod), so that helm's and Kubernetes' packages stay
# out of the product's go.mod; the first, cold compile takes minutes.
HELM_TESTFLAGS ?= -count=1 -timeout 10m
test-helm:
	cd deploy/helm && $(GO) test $(HELM_TESTFLAGS) ./...

# The chart on a real Kubernetes API server, through Helm 4's Go SDK:
# scripts/kube-local runs etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and kwok's fake nodes on 127.0.0.1 (built once from their
# Go modules by `scripts/kube-local fetch` into ~/.cache/flakestream/kube:
# about half an hour cold, nothing warm). Install (defaults, everything on,
# with the KEDA and Prometheus Operator CRDs), upgrade, eviction, rollback,
# scale, uninstall, refused values; then each rendered container run as a
# flakestream process against Apache Kafka (scripts/kafka-local) and
# redis-server. The control plane's logs stay in $(ARTIFACTS)/kube-local.
test-k8s:
	@mkdir -p $(ARTIFACTS)
	@set -e; art=$(abspath $(ARTIFACTS)); \
	scripts/kube-local fetch >/dev/null; \
	rm -rf $$art/kube-local; \
	trap "$(CURDIR)/scripts/kube-local stop --pid-file $$art/kube-local.pid; $(CURDIR)/scripts/kafka-local stop --pid-file $$art/kafka-k8s.pid" EXIT INT TERM; \
	kc=$$(scripts/kube-local start --pid-file $$art/kube-local.pid --data-dir $$art/kube-local --nodes 3 --timeout 45m); \
	addr=$$(scripts/kafka-local start --pid-file $$art/kafka-k8s.pid --timeout 45m); \
	echo "test-k8s: API server of $$kc, Apache Kafka at $$addr"; \
	cd deploy/helm && FLAKESTREAM_KUBECONFIG=$$kc FLAKESTREAM_REQUIRE_K8S=1 KAFKA_BROKERS=$$addr \
		$(GO) test -count=1 -timeout 40m -run '^(TestK8s|TestPodSpecRun)' -v .

# `helm lint` and `helm template` of the chart without a helm binary: the
# same helm packages, through deploy/helm/cmd/flakestream-chart. Values:
# make helm HELM_ARGS='-f my-values.yaml --set replay.enabled=true'
HELM_ARGS ?=
helm:
	cd deploy/helm && $(GO) run ./cmd/flakestream-chart lint $(HELM_ARGS) flakestream
	cd deploy/helm && $(GO) run ./cmd/flakestream-chart template $(HELM_ARGS) flakestream

# The end-to-end and fault suite (test/faults/) on a real Apache Kafka broker: one
# shared broker from scripts/kafka-local (always stopped at the end; the
# broker-restart tests start their own) and a real redis-server. Results go
# to $(ARTIFACTS)/faults.jsonl and worker logs to $(ARTIFACTS)/logs/.
# Then the cluster stage (test-kafka-cluster).
# The suite's go test timeout is a hang guard, not a pace: about 7 min on a
# quiet 2-core machine, 1,043 s with a CPU hog on every core; 40m leaves
# room for a slower machine without letting a hang run on.
ARTIFACTS ?= artifacts
E2E_PKGS  ?= ./test/faults/
E2EFLAGS  ?= -count=1 -timeout 40m -v
# Tests that run on kfake in `make test` and again on the real broker here:
# replay, idempotency, and every record-size boundary (the producer's, the
# topics' and the brokers' limits, a 5 MB order, a record the broker refuses).
BROKER_TESTS ?= TestReplay|TestIdempotency|TestBatchBytes|TestWorker(ProducerLimit|TopicLimits|BrokerLimit|FiveMegabyteOrder|RejectedRecord)
test-kafka:
	@mkdir -p $(ARTIFACTS)
	@set -e; pid=$(abspath $(ARTIFACTS))/kafka-local.pid; \
	addr=$$(scripts/kafka-local start --pid-file $$pid --timeout 30m); \
	trap "scripts/kafka-local stop --pid-file $$pid" EXIT INT TERM; \
	echo "test-kafka: Apache Kafka at $$addr"; \
	KAFKA_BROKERS=$$addr FLAKESTREAM_KAFKA_LOCAL=1 FLAKESTREAM_ARTIFACTS=$(abspath $(ARTIFACTS)) \
		$(GO) test $(E2EFLAGS) -skip '^TestCluster|$(SECURE_SKIP)' $(E2E_PKGS); \
	echo "test-kafka: replay, idempotency and record sizes on Apache Kafka"; \
	KAFKA_BROKERS=$$addr $(GO) test -pgo=off -count=1 -timeout 10m -run '$(BROKER_TESTS)' ./pipeline/ ./replay/ ./test/process/ .
	$(MAKE) test-kafka-cluster

# Interop with a client the project did not write (issue 12): Confluent's
# Python client (confluent-kafka, with its Avro and Protobuf serializers, in
# a venv from scripts/interop-venv, PyPI) produces orders to a real Apache
# Kafka broker (scripts/kafka-local), the worker numbers them through an
# in-process srfake registry, Python reads them back. Also the codec-level
# interop test (no broker). Needs python3 with venv and pip.
INTEROP_VENV ?= $(HOME)/.cache/flakestream/interop-venv
test-interop:
	@set -e; py=$$(scripts/interop-venv $(INTEROP_VENV) | tail -n 1); \
	echo "test-interop: $$py"; \
	FLAKESTREAM_INTEROP_PYTHON=$$py FLAKESTREAM_KAFKA_LOCAL=1 \
		$(GO) test -count=1 -timeout 10m -v -run 'Interop' ./pipeline/ ./codec/schema/

# The Prometheus rules: promtool checks them (and the docker-compose
# Prometheus configuration) and runs their unit tests. Debian: apt-get
# install prometheus.
PROMTOOL ?= promtool
test-rules:
	$(PROMTOOL) check rules deploy/prometheus/flakestream-rules.yml
	cd deploy/prometheus && $(PROMTOOL) check config prometheus.yml && $(PROMTOOL) test rules flakestream-rules.test.yml

# The cluster stage: the fault suite on 3-node clusters (RF 3, min ISR 2),
# one run of each fault, each test on a cluster of its own from
# `scripts/kafka-local start --nodes 3` (three JVMs of 384m heap each).
# Kafka's console consumer (kafka-tools, fetched once by
# `scripts/kafka-local tools`) reads two of them again. The soak repeats
# one: go run ./test/soak -fault cluster-txn-coordinator -runs 10
CLUSTERFLAGS ?= -count=1 -timeout 40m -v
test-kafka-cluster:
	@mkdir -p $(ARTIFACTS)
	FLAKESTREAM_KAFKA_LOCAL=1 FLAKESTREAM_ARTIFACTS=$(abspath $(ARTIFACTS)) \
		$(GO) test $(CLUSTERFLAGS) -run '^TestCluster' $(E2E_PKGS)

# The secured stage: each test on a broker of its own from
# `scripts/kafka-local start --secure` (SASL_SSL, SCRAM and PLAIN, a CA it
# makes, client certificates, StandardAuthorizer; one test on a secured
# 3-node cluster), each command signed in as a principal holding only its
# rows of docs/security.md's ACL table: the orphan guard with no right on
# the cluster, each of the worker's ACLs revoked mid-run, OAUTHBEARER
# against a JWKS the test serves (TestWorkerOAuthBearer), and the suite's
# rows (TestSecureRows: the pipeline, worker SIGKILL, broker SIGKILL, and
# replay, verify and audit, each also refused without one of its rows).
# The tests that start a secured broker run here only: make test and
# test-kafka skip them (SECURE_SKIP).
SECURE_TESTS ?= TestSecureKafka|TestACLTable|TestGuardOnRealKafka|TestWorkerRevokedACLEndsWithOneLine|TestWorkerOAuthBearer|TestSecureRows
SECURE_SKIP  ?= ^(TestSecureKafka|TestSecureKafkaCluster|TestGuardOnRealKafka|TestWorkerRevokedACLEndsWithOneLine|TestWorkerOAuthBearer|TestSecureRows)$$
test-kafka-secure:
	@mkdir -p $(ARTIFACTS)
	FLAKESTREAM_KAFKA_LOCAL=1 FLAKESTREAM_ARTIFACTS=$(abspath $(ARTIFACTS)) \
		$(GO) test -count=1 -timeout 25m -v -run '$(SECURE_TESTS)' ./test/testenv/ ./eos/txnguard/ ./test/process/ ./test/faults/

lint: fmt vet staticcheck lint-helm lint-bench

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet -pgo=off $(PKGS)

staticcheck:
	$(GO) tool staticcheck $(PKGS)

# go vet and staticcheck on the chart's test module (deploy/helm), which
# ./... does not reach; staticcheck is the main module's, built into bin/.
lint-helm:
	cd deploy/helm && $(GO) vet ./...
	$(GO) build -o bin/staticcheck honnef.co/go/tools/cmd/staticcheck
	cd deploy/helm && ../../bin/staticcheck ./...

# The bench module (bench/: the peer programs, verifybench, the run
# records): built, vetted and staticchecked, so that a measurement tool
# never rots between runs.
lint-bench:
	cd bench && $(GO) build ./... && $(GO) vet ./...
	$(GO) build -o bin/staticcheck honnef.co/go/tools/cmd/staticcheck
	cd bench && ../bin/staticcheck ./...

# Go benchmarks; the end-to-end figures come from `go run . bench`.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 1 $(PKGS)

demo:
	$(GO) run . demo

# A bounded run of every fuzz target of the module, each for FUZZTIME
# (scripts/fuzz finds them with `go test -list`). A failing input fails it
# and is written under the package's testdata/fuzz/<target>/.
FUZZTIME ?= 20s
fuzz:
	GO=$(GO) scripts/fuzz $(FUZZTIME)

# The ten longest non-test functions; fails when one is over 80 lines.
funclen:
	$(GO) test -count=1 -run 'TestLongestFunction' -v ./tools/funclen/

clean:
	rm -rf bin
