# fencer: the README's two commands are `make run` and `make test`.
GO      ?= go
BIN     := bin/fencer
PKGS    := ./...
# Debian's python3 (not a pyenv or venv one on PATH) for the Python client.
PYTHON  ?= /usr/bin/python3

.PHONY: all build run test test-unit test-python conformance vet fmt chaos bench clean

DURATION ?= 3m
SEED     ?= 0
NODES    ?= 3
# The members' log store in make chaos: bolt, wal, or mixed.
LOG_STORE ?= bolt
# The version "fencer version" prints: the nearest tag or the commit.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null)

all: build

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/fencer

## run: a local 3-node cluster in one process (Ctrl-C stops it). It keeps
## its state in ~/.local/state/fencer/dev; DEV_FLAGS=--ephemeral for a
## throwaway one.
run: build
	./$(BIN) dev $(DEV_FLAGS)

## test: vet, then every test, with PostgreSQL started for the fence tests
## (needs root; installs postgresql with apt if missing) and stopped after,
## and a MariaDB server of the tests' own (scripts/with-mariadb.sh: installs
## mariadb-server with apt if missing, data in a temp dir, removed after)
## for fence/mysqlfence, and a private redis-server on loopback for the
## Redis fence's (Go's and Python's; scripts/with-redis.sh installs
## redis-server with apt if missing, and stops the server and removes its
## files after),
## and Prometheus's binaries installed for the alert tests (a test starts its
## own Prometheus on loopback); then the Kubernetes manifests' test, a module
## of its own so that fencer's go.mod has no Kubernetes dependencies, and
## likewise the fenced leader election for Kubernetes controllers
## (integrations/k8sleader: client-go's elector in several processes
## against bin/fencer members) and its example (examples/k8s-controller,
## vetted: it needs a cluster to run).
## The Python client's tests (clients/python, with python3-psycopg2 for its
## PostgreSQL example) run in the same PostgreSQL session, after Go's.
## The dashboard's browser tests (test/ui) drive Debian's chromium, installed
## if missing; they fail without it (FENCER_SKIP_BROWSER_TESTS=1 skips them).
## Every client is built first (scripts/build-clients.sh), and the
## conformance suite (test/conformance) fails a client that is not.
test: vet build
	@scripts/ensure-prometheus.sh
	@scripts/ensure-chromium.sh
	@PYTHON=$(PYTHON) scripts/ensure-python.sh
	scripts/build-clients.sh
	@scripts/with-postgres.sh scripts/with-mariadb.sh scripts/with-redis.sh env FENCER_REQUIRE_CLIENTS=1 FENCER_REQUIRE_PG=1 FENCER_REQUIRE_MYSQL=1 FENCER_REQUIRE_REDIS=1 FENCER_REQUIRE_PROMETHEUS=1 sh -c '$(GO) test -count=1 -timeout 15m $(PKGS) && $(MAKE) --no-print-directory test-python'
	cd deploy/kubernetes/manifesttest && $(GO) vet ./... && $(GO) test -count=1 ./...
	cd integrations/k8sleader && $(GO) vet ./... && $(GO) test -count=1 ./...
	cd examples/k8s-controller && $(GO) vet ./...

## test-python: the Python client installed as its README says (pip
## --no-build-isolation with Debian's setuptools and wheel, offline) into a
## temporary directory removed after, then its tests against that install and
## real nodes (bin/fencer); its PostgreSQL example runs when
## FENCER_TEST_PG_DSN is set (make test sets it).
test-python: build
	@PYTHON=$(PYTHON) scripts/ensure-python.sh
	PYTHON=$(PYTHON) FENCER_BIN=$(CURDIR)/$(BIN) scripts/test-python.sh

## conformance: the conformance suite alone, every client that is built
## (test/conformance: PROTOCOL.md's scenarios through each client's agent).
conformance:
	scripts/build-clients.sh
	$(GO) test -count=1 -timeout 15m ./test/conformance/ -run '^TestConformance$$' -v

## test-unit: every test that needs no PostgreSQL, MariaDB or Redis (those skip).
test-unit:
	$(GO) test -count=1 $(PKGS)

## chaos: real nodes, clients and a fenced resource under kills, pauses,
## partitions (Raft and HTTP), membership changes and stacked faults; every
## history checked. NODES initial members. SEED=0 picks one and prints it;
## pass it back to replay. LOG_STORE=wal (or mixed) runs the members on
## raft-wal. From DURATION=5m it is a soak: member n1 is never
## killed or wiped, and each node's RSS, open fds and goroutines must not
## grow beyond the bounds the report states.
chaos: build
	$(GO) test ./test/chaos/ -run '^TestChaos$$' -count=1 -timeout 0 -v \
	  -chaos.duration=$(DURATION) -chaos.seed=$(SEED) -chaos.nodes=$(NODES) -chaos.log-store=$(LOG_STORE) -chaos.artifacts=$(CURDIR)/artifacts/chaos

## bench: fencer against a 3-member etcd on this machine, throughput and then
## what stopping the leader costs (failover); QUICK=1 for a smoke run.
bench: build
	scripts/bench-vs-etcd.sh

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin artifacts
