# Vigil's tasks. Tools are pinned here and installed into ./bin by `make tools`.
SHELL := /bin/bash
BIN := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)
export TESTCONTAINERS_RYUK_DISABLED ?= true

BUF_VERSION := v1.75.0
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.0
GRPC_GATEWAY_VERSION := v2.33.0

# Every Go module of the workspace, as ./dir/... patterns. go skips directories whose name starts
# with a dot when it expands ./dir/..., so .ci's module is named by its import path.
MODULES := $(shell sed -n 's|^\t\./\(.*\)$$|\1|p' go.work)
PACKAGES := $(foreach m,$(MODULES),$(if $(filter .%,$(m)),github.com/vigil-dev/vigil/$(patsubst .%,%,$(m))/...,./$(m)/...))

# The CI checker (.ci/testcheck): a stage's tests run through .ci/gotest, which fails when one
# failed, was skipped or never ended, or when a test the stage names in .ci/expected did not run.
TESTCHECK := $(BIN)/testcheck

# The Redis image tests run: the local one built from Debian's redis-server when it exists,
# else whatever VIGIL_REDIS_IMAGE says, else the official image (see pkg/redistest).
REDIS_IMAGE_LOCAL := vigil/redis:local

.PHONY: all tools generate check-generated lint vet test test-race run deps redis-image bench images

all: generate lint test

$(BIN)/buf:
	GOBIN=$(BIN) go install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
$(BIN)/protoc-gen-go:
	GOBIN=$(BIN) go install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
$(BIN)/protoc-gen-go-grpc:
	GOBIN=$(BIN) go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
$(BIN)/protoc-gen-grpc-gateway:
	GOBIN=$(BIN) go install github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-grpc-gateway@$(GRPC_GATEWAY_VERSION)
$(BIN)/protoc-gen-openapiv2:
	GOBIN=$(BIN) go install github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-openapiv2@$(GRPC_GATEWAY_VERSION)
$(TESTCHECK): $(wildcard .ci/testcheck/*.go)
	go build -o $@ github.com/vigil-dev/vigil/ci/testcheck

tools: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc $(BIN)/protoc-gen-grpc-gateway $(BIN)/protoc-gen-openapiv2

generate: tools
	buf generate

# Fails when the committed generated code is not what `buf generate` makes.
check-generated: generate
	@git add -N pkg/api gateway/openapi >/dev/null 2>&1 || true
	@git diff --exit-code --stat -- pkg/api gateway/openapi || { echo "generated code is stale: run make generate and commit"; exit 1; }

lint: tools
	buf lint
	buf format -d --exit-code
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	go vet $(PACKAGES)

# Debian packages the suite needs (redis-server for the local Redis image, chromium and ffmpeg
# for the browser tests): installed when missing and possible (root with apt-get), else named.
deps:
	@missing=""; for c in redis-server:redis-server redis-cli:redis-tools chromium:chromium ffmpeg:ffmpeg; do \
		command -v $${c%%:*} >/dev/null || missing="$$missing $${c##*:}"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "installing$$missing"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
		else echo "make test needs these Debian packages:$$missing"; exit 1; fi; fi

redis-image:
	@if command -v redis-server >/dev/null && ! docker image inspect $(REDIS_IMAGE_LOCAL) >/dev/null 2>&1; then \
		deploy/redis/build-image.sh $(REDIS_IMAGE_LOCAL); fi

# The test suite: real Redis in containers (or VIGIL_TEST_REDIS_URL), real gRPC, real sockets,
# headless Chromium; .ci's own tests break each CI guard once and see it fail.
test: deps redis-image
	@if [ -z "$$VIGIL_REDIS_IMAGE" ] && docker image inspect $(REDIS_IMAGE_LOCAL) >/dev/null 2>&1; then \
		export VIGIL_REDIS_IMAGE=$(REDIS_IMAGE_LOCAL); fi; \
	go test -count=1 -timeout 30m $(PACKAGES)

# go vet over every module (lint runs it too, after buf and gofmt).
vet:
	go vet $(PACKAGES)

# The Go benchmarks (no tests), each run for BENCHTIME, the whole run bounded by BENCH_TIMEOUT.
BENCHTIME ?= 200ms
BENCH_TIMEOUT ?= 15m
bench: redis-image
	@if [ -z "$$VIGIL_REDIS_IMAGE" ] && docker image inspect $(REDIS_IMAGE_LOCAL) >/dev/null 2>&1; then \
		export VIGIL_REDIS_IMAGE=$(REDIS_IMAGE_LOCAL); fi; \
	go test -run '^$$' -bench . -benchtime $(BENCHTIME) -count=1 -timeout $(BENCH_TIMEOUT) $(PACKAGES)

# The race detector over every package with tests (computed by .ci/racepkgs, so a new package
# joins with its first test), minus those .ci/race-exclude.txt names with the reason: the
# concurrent code runs in its own tests (hubs, indexes, the clock, the picker) and in the
# gateway's and services' tests, which start real servers. Bounded: a test binary that runs
# past RACE_TIMEOUT fails the run. Measured 2026-12-05 on 2 cores at load averages 25-70
# (other sessions' builds and tests): 51 packages in 58 min of wall time but 12 min of CPU, the
# longest binary services/reservations/service at 10.2 min and gateway at 6.3 min (estimated
# on a quiet machine, from that CPU less gateway/uitest's, over 2 cores: 6-10 min).
RACE_TIMEOUT ?= 20m
test-race: redis-image
	@if [ -z "$$VIGIL_REDIS_IMAGE" ] && docker image inspect $(REDIS_IMAGE_LOCAL) >/dev/null 2>&1; then \
		export VIGIL_REDIS_IMAGE=$(REDIS_IMAGE_LOCAL); fi; \
	pkgs=$$(go run github.com/vigil-dev/vigil/ci/racepkgs -exclude .ci/race-exclude.txt $(PACKAGES)) && \
	.ci/gotest -allow-no-tests -- -race -count=1 -timeout $(RACE_TIMEOUT) $$pkgs

# Runs every service and the gateway in one process (see README).
run:
	go run ./cmd/vigil dev

# --- Deployment: images, compose, cluster and fault suites (docs/OPERATIONS.md) ---
.PHONY: compose-up compose-down test-cluster test-faults k8s-validate

# One FROM scratch image per service and the gateway, from binaries compiled here.
images: redis-image
	deploy/images.sh

# The whole system under compose (one Redis per domain), waiting until every container is healthy.
compose-up: images
	deploy/compose-up.sh

# Takes down either stack, the HA one too: its file names the replicas' volumes, which down -v
# must remove as well (a node writes its config on its volume's first start only, so a volume
# left behind starts the next stack's replica with the last one's role, or without TLS).
compose-down:
	@if docker compose version >/dev/null 2>&1; then c="docker compose"; else c=docker-compose; fi; \
	$$c -f deploy/docker-compose.yml -f deploy/docker-compose.ha.yml -p $${VIGIL_COMPOSE_PROJECT:-vigil} down -v --remove-orphans

# pkg/redisx's tests and the alarm queue's, reservations', locks' and chat's store tests on a
# real Redis Cluster (3 masters with a replica each, started per test binary), the reservations service's SIGKILLed-replica test on
# it (every test of these packages; none may skip), then a master killed mid-load
# (.ci/expected/cluster.txt names the tests).
CLUSTER_PACKAGES := ./pkg/alarm/... ./pkg/redisx/... ./services/reservations/internal/store/... ./services/reservations/service/... \
	./services/locks/internal/store/... ./services/chat/internal/store/...
test-cluster: redis-image
	@if [ -z "$$VIGIL_REDIS_IMAGE" ] && docker image inspect $(REDIS_IMAGE_LOCAL) >/dev/null 2>&1; then \
		export VIGIL_REDIS_IMAGE=$(REDIS_IMAGE_LOCAL); fi; \
	VIGIL_TEST_REDIS_CLUSTER=start .ci/gotest -- -count=1 -p 1 -timeout 15m $(CLUSTER_PACKAGES) && \
	.ci/gotest -expect .ci/expected/cluster.txt -v -show '$(FAULT_LINES)' -- \
		-tags faulttest -count=1 -timeout 10m -run '^TestCluster' ./deploy/faulttest/

# Fault suite: each test prints what was at stake and what was lost. The SIGKILLed-replica test
# lives beside the reservations service (services/reservations/service/crash_test.go) and runs
# in `make test`; it is not run twice.
# .ci/expected/faults.txt names the tests; FAULT_LINES are the lines of their output shown.
FAULT_LINES := ^(=== RUN|--- |\s+\w+_test.go|ok|FAIL|PASS|panic)
test-faults: redis-image
	@if [ -z "$$VIGIL_REDIS_IMAGE" ] && docker image inspect $(REDIS_IMAGE_LOCAL) >/dev/null 2>&1; then \
		export VIGIL_REDIS_IMAGE=$(REDIS_IMAGE_LOCAL); fi; \
	go vet -tags faulttest ./deploy/faulttest/ && \
	.ci/gotest -expect .ci/expected/faults.txt -v -show '$(FAULT_LINES)' -- \
		-tags faulttest -count=1 -timeout 10m -run '^TestFault' ./deploy/faulttest/

# Nemesis suite (issue 25): two replicas each of locks, reservations, chat and practice rooms
# under load while one is paused (SIGSTOP), partitioned (its traffic held by the test's proxy),
# run 30s ahead, or SIGKILLed; a history checker per domain; one table (docs/OPERATIONS.md, "When a replica stops
# answering"). The store nemesis (issue 43): a primary, two replicas and three Sentinels of the
# test's own, the primary SIGKILLed, paused, cut off alone and restarted under load, with async
# (losses must show) and replica durability (none may), the rooms and their Lobby among the
# domains; and one Redis SIGKILLed and started at once under everysec and fsync.
# .ci/expected/nemesis.txt names the tests. At most NEMESIS_TIMEOUT (the package took 576 s at
# load 7-30).
NEMESIS_TIMEOUT ?= 12m
.PHONY: test-nemesis
test-nemesis: redis-image
	@if [ -z "$$VIGIL_REDIS_IMAGE" ] && docker image inspect $(REDIS_IMAGE_LOCAL) >/dev/null 2>&1; then \
		export VIGIL_REDIS_IMAGE=$(REDIS_IMAGE_LOCAL); fi; \
	go vet -tags nemesis ./deploy/nemesis/ && \
	.ci/gotest -expect .ci/expected/nemesis.txt -v -- -tags nemesis -count=1 -timeout $(NEMESIS_TIMEOUT) ./deploy/nemesis/

# Through the composed gateway: write to every domain, SIGKILL every Redis (every primary on the
# highly available stack), check nothing acknowledged was lost (deploy/compose-smoke.sh).
.PHONY: compose-smoke
compose-smoke:
	deploy/compose-smoke.sh

# Issue 25 as an operator tries it (deploy/composepause): the compose file scaled to two
# replicas each of room, chat and locks (project vigilpause, gateway on 127.0.0.1:18090), 30
# room viewers, 30 chat members and REST lock calls through the gateway while the serving
# replica of each is frozen with docker pause; then one replica each paused for 30 s. Prints
# every time it measures. .ci/expected/compose-pause.txt names the tests. At most
# COMPOSE_PAUSE_TIMEOUT; the stack is taken down after.
COMPOSE_PAUSE_TIMEOUT ?= 7m
.PHONY: test-compose-pause
test-compose-pause: images
	go vet -tags composepause ./deploy/composepause/ && \
	.ci/gotest -expect .ci/expected/compose-pause.txt -v -- -tags composepause -count=1 -timeout $(COMPOSE_PAUSE_TIMEOUT) ./deploy/composepause/

# Issue 43 as an operator tries it (deploy/composeha): the HA stack (VIGIL_HA=1 VIGIL_INSECURE=1
# compose-up.sh) under REST load through the gateway while one domain's primary is SIGKILLed,
# paused past the failover timeout, cut off from the network and isolated from its replicas and
# sentinels (the services still reaching it), each in turn; counts what was
# acknowledged, lost (must be 0) and unknown, checks fencing tokens and the longest time a
# domain went unanswered. .ci/expected/compose-ha.txt names the test. At most COMPOSE_HA_TIMEOUT;
# the stack is taken down after.
COMPOSE_HA_TIMEOUT ?= 12m
.PHONY: test-compose-ha
test-compose-ha: images
	go vet -tags composeha ./deploy/composeha/ && \
	.ci/gotest -expect .ci/expected/compose-ha.txt -v -- -tags composeha -count=1 -timeout $(COMPOSE_HA_TIMEOUT) ./deploy/composeha/

# The Kubernetes manifests decoded strictly with k8s.io/api types, plus cross-reference checks
# (no schema registry is reachable for kubeconform; see deploy/k8s/validate_test.go);
# .ci/expected/k8s.txt names the tests.
k8s-validate:
	.ci/gotest -expect .ci/expected/k8s.txt -v -show '^(--- |\s+\w+_test.go|ok|FAIL|PASS)' -- -count=1 ./deploy/k8s/

# The generated Python client (pkg/api/python) against `vigil dev`, over gRPC; unittest's own
# report read by testcheck, which fails when a test .ci/expected/python.txt names did not run
# and pass, or one was skipped.
.PHONY: test-python
test-python: $(TESTCHECK)
	set -o pipefail; deploy/python-client-test.sh 2>&1 | $(TESTCHECK) -unittest -expect .ci/expected/python.txt

# Modules a caller can import (issue 14): every module is tidy and builds on its own, outside the
# workspace (replace lines point at its siblings); no non-test package anywhere imports the test
# helpers (pkg/redistest, pkg/tlstest, pkg/wait, pkg/server/servertest, pkg/clock/clocktest,
# pkg/prom/promtest); the committed go.work.sum already holds every checksum the workspace's
# module graph needs, so building, testing or `go list -m all` leave the tree clean. pkg/api's
# own test (make test) checks that the clients' graph is gRPC, protobuf and grpc-gateway only.
.PHONY: check-modules
check-modules:
	@set -e; for m in $(MODULES); do \
		( cd $$m && GOWORK=off go mod tidy -diff >/dev/null ) || { echo "$$m: go.mod/go.sum not tidy: cd $$m && GOWORK=off go mod tidy"; exit 1; }; \
		( cd $$m && GOWORK=off go build -o /dev/null ./... ) || { echo "$$m does not build outside the workspace"; exit 1; }; \
	done
	@bad=$$(go list -f '{{.ImportPath}}{{range .Deps}} {{.}}{{end}}' $(PACKAGES) | \
		awk '$$1 !~ /\/pkg\/(redistest|tlstest|wait|server\/servertest|clock\/clocktest|prom\/promtest)$$/ { for (i = 2; i <= NF; i++) if ($$i ~ /\/pkg\/(redistest|tlstest|wait|server\/servertest|clock\/clocktest|prom\/promtest)$$/) print $$1 " imports " $$i }'); \
	if [ -n "$$bad" ]; then echo "only tests may import the test helpers:"; echo "$$bad"; exit 1; fi
	@go list -m all >/dev/null
	@git diff --exit-code --stat -- go.work.sum || { echo "go.work.sum lacks checksums the workspace needs: commit it"; exit 1; }
