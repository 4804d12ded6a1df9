# Helios — the two set-up commands are `make run` and `make test`.
GO      ?= go
BIN     := bin/helios
PKGS    := ./...
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/helios-lb/helios/internal/cli.Version=$(VERSION)

.PHONY: all build run test test-short vet fmt bench bench-quick bench-deps clean

all: build

## build: the static helios binary in bin/
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/helios

## run: the demo — three built-in backends on :9001-9003 and Helios on :8080 (Ctrl-C stops all)
run: build
	@./scripts/demo.sh $(BIN) configs/helios.yaml

## test: vet, then every test with the race detector
test:
	$(GO) vet $(PKGS)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) test -race -timeout 10m $(PKGS)
	HELIOS_TEST_ENGINE=goroutine $(GO) test -race -timeout 10m ./internal/server/

## test-short: the tests without the race detector
test-short:
	$(GO) test -timeout 10m $(PKGS)

vet:
	$(GO) vet $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

## bench: the full `helios bench` suite against nginx (about 21 minutes on 2 CPUs; report in bench/results/DATE-HOST/)
bench: build
	$(BIN) bench $(BENCHFLAGS)

## bench-quick: proxy-ka at c100 and c1000, one 5s round (about a minute)
bench-quick: build
	$(BIN) bench --quick $(BENCHFLAGS)

## bench-deps: install what `helios bench` drives (Debian packages)
bench-deps:
	@if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	$$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk nginx haproxy nghttp2-client util-linux >/dev/null && \
	{ $$SUDO systemctl disable --now nginx haproxy >/dev/null 2>&1 || $$SUDO service nginx stop >/dev/null 2>&1 || true; }

clean:
	rm -rf bin
