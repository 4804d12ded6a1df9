# Helios — the two set-up commands are `make run` and `make test`.
GO      ?= go
BIN     := bin/helios
PKGS    := ./...
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -s -w -X github.com/helios-lb/helios/internal/cli.Version=$(VERSION) -X github.com/helios-lb/helios/internal/cli.Revision=$(REVISION)

.PHONY: all build image run acme-demo test test-deps test-short fuzz vet fmt bench bench-quick bench-deps deploy-deps redis-deps redis-image fleet-test clean

all: build

## build: the static helios binary in bin/, and the demo's self-signed certificate in
## .cache/demo-tls (configs/helios.yaml's TLS listener serves it; remade when 60 days old)
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/helios
	@scripts/demo-tls.sh $(BIN) .cache/demo-tls

## image: the container image helios:latest (FROM scratch, from bin/helios: no registry needed)
image: build
	docker build -f deploy/docker/Dockerfile -t helios:$(VERSION) -t helios:latest \
		--build-arg VERSION=$(VERSION) \
		--build-arg REVISION=$(or $(REVISION),unknown) \
		--build-arg CREATED=$$(date -u +%Y-%m-%dT%H:%M:%SZ) .

## run: the demo — three built-in backends on :9001-9003 and Helios on :8080 (Ctrl-C stops all)
run: build
	@./scripts/demo.sh $(BIN) configs/helios.yaml

## acme-demo: automatic HTTPS against a local Pebble: a certificate for localhost, served, redirected, listed (KEEP=1 keeps it running)
acme-demo: build
	@./scripts/acme-demo.sh $(BIN)

## test: vet (on Linux, and on two systems without epoll, tests included), every test with
## the race detector, then the allocation tests, which the race detector's own allocations skip.
## The race detector needs cgo, so a C compiler: make test-deps installs one.
test:
	@cc="$$($(GO) env CC)"; if [ "$$($(GO) env CGO_ENABLED)" != 1 ] || ! command -v "$${cc%% *}" >/dev/null 2>&1; then \
		echo "make test runs the race detector, which needs cgo and a C compiler ($$cc not found, or CGO_ENABLED=0): run make test-deps (Debian packages gcc, libc6-dev), or make test-short without it" >&2; exit 1; fi
	$(GO) vet $(PKGS)
	GOOS=darwin $(GO) vet $(PKGS)
	GOOS=freebsd $(GO) vet $(PKGS)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) test -race -timeout 10m $(PKGS)
	HELIOS_TEST_ENGINE=portable $(GO) test -race -timeout 10m ./internal/server/
	$(GO) test -count=1 -run 'Allocs$$' $(PKGS)

## test-deps: the C compiler the race detector (cgo) needs for make test (Debian packages)
test-deps:
	@if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	$$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc libc6-dev >/dev/null

## test-short: the tests without the race detector
test-short:
	$(GO) test -timeout 10m $(PKGS)

## fuzz: every Fuzz target in turn, FUZZTIME each on top of its seeds (FUZZFLAGS=-parallel=1: one CPU)
FUZZTIME  ?= 10s
FUZZFLAGS ?=
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) FUZZFLAGS='$(FUZZFLAGS)' scripts/fuzz.sh $(PKGS)

vet:
	$(GO) vet $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

## bench: the full `helios bench` suite against every installed peer (about an hour on 2 CPUs with
## all three; `bin/helios bench --plan` prints the runs and the estimate for this machine; report
## in bench/results/DATE-HOST/)
bench: build
	$(BIN) bench $(BENCHFLAGS)

## bench-quick: proxy-ka at c100 and c1000, one 5s round, every peer (about a minute)
bench-quick: build
	$(BIN) bench --quick $(BENCHFLAGS)

## bench-deps: install what `helios bench` drives (Debian packages)
bench-deps: redis-deps
	@if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	$$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk nginx haproxy caddy nghttp2-client util-linux >/dev/null && \
	{ $$SUDO systemctl disable --now nginx haproxy caddy >/dev/null 2>&1 || { $$SUDO service nginx stop; $$SUDO service haproxy stop; $$SUDO service caddy stop; } >/dev/null 2>&1 || true; }

## deploy-deps: what the deployment tests use (Debian packages): systemd-analyze and
## systemd-socket-activate (systemd), promtool (prometheus), docker-compose, logrotate; and
## debootstrap, which scripts/systemd-sandbox.sh uses to build its Debian container
deploy-deps:
	@if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	$$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		systemd prometheus docker-compose logrotate debootstrap >/dev/null && \
	{ $$SUDO systemctl disable --now prometheus >/dev/null 2>&1 || $$SUDO service prometheus stop >/dev/null 2>&1 || true; }

## redis-deps: redis-server (Debian package), which the shared rate limit and ACME storage
## tests start on loopback (the package's own service is left stopped)
redis-deps:
	@if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	$$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null && \
	{ $$SUDO systemctl disable --now redis-server >/dev/null 2>&1 || $$SUDO service redis-server stop >/dev/null 2>&1 || true; }

## redis-image: the Redis image deploy/compose/fleet.yaml uses (helios-redis:latest, FROM scratch,
## from the host's redis-server and its libraries: no registry needed)
redis-image:
	deploy/redis/build-image.sh helios-redis:latest

## fleet-test: issue 23's fleet test on the Docker engine (deploy/compose/fleet.yaml: three
## instances, backends scaled by Docker's DNS, a shared rate limit, Redis stopped and started);
## skips where Docker is absent
fleet-test:
	HELIOS_FLEET_TEST=1 $(GO) test -count=1 -timeout 10m -run '^TestFleet$$' -v ./deploy/

clean:
	rm -rf bin
