# Shinken — `make run` starts a server, `make test` runs every test.
# Everything a fresh Debian machine lacks is installed by `make deps`.

SHELL       := /bin/bash
GO          ?= go
PYTHON      ?= /usr/bin/python3
BIN         := bin
POOL        ?= 4
LISTEN      ?= 127.0.0.1:8700
PROVIDER    ?= process
TEST_FLAGS  ?= -count=1 -timeout 25m -p 1
# Debian packages: the desktop inside sandboxes, the bench baseline (xdotool,
# scrot), the Python client's dependencies, debootstrap for the image, the
# session and accessibility buses (dbus, at-spi2-core, the GTK bridges,
# nss_wrapper), Chromium (sandboxed browser tasks and the web UI's browser
# tests), LibreOffice Calc and Writer, pdftotext (poppler-utils) for the
# verifier library's pdftext op, VLC and GIMP (OSWorld's vlc and gimp
# tasks), and ffmpeg (episode videos).
DEB_PKGS    := xvfb openbox xterm x11-utils xdotool scrot mousepad pcmanfm galculator mupdf feh dbus at-spi2-core libatk-adaptor libgail-common libnss-wrapper \
               fonts-dejavu-core python3-msgpack python3-numpy python3-pil python3-pytest \
               debootstrap chromium libreoffice-calc libreoffice-writer libreoffice-gtk3 poppler-utils \
               vlc gimp ffmpeg
GO_BINS     := envserver guestd rollout bench

.PHONY: help deps build run test test-go test-lane-1 test-lane-2 test-race-core test-python test-race bench bench-quick fuzz lint image image-envserver test-k8s k8s-bin clean

help: ## list targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

deps: ## install missing Debian packages and Go modules
	@missing=$$(for p in $(DEB_PKGS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  SUDO=$$( [ $$(id -u) -eq 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
	@SUDO=$$( [ $$(id -u) -eq 0 ] || echo sudo -n ); $$SUDO sh images/compose-cache.sh || true
	$(GO) mod download

build: ## build the binaries into bin/
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ $(addprefix ./cmd/,$(filter-out guestd,$(GO_BINS)))
	CGO_ENABLED=0 $(GO) build -o $(BIN)/ ./cmd/guestd   # static: also mounted into containers

run: deps build ## start envserver on $(LISTEN) with a warm pool of $(POOL) (PROVIDER=docker for containers)
	@if [ "$(PROVIDER)" = docker ]; then $(MAKE) --no-print-directory image; fi
	$(BIN)/envserver --listen $(LISTEN) --pool $(POOL) --provider $(PROVIDER) --state var/state

# Packages whose concurrency the race detector checks in every `make test`.
# envserver's end-to-end suite runs under `make test-race` only: instrumented,
# on two cores, its fourteen concurrent desktops outlast their own deadlines.
RACE_PKGS   ?= ./pool ./trajectory ./guest/client ./guest/wire ./rollout ./envserver/ui ./envserver/api

# What this host provides is required, not optional: where the engine
# answers, docker tests fail instead of skipping; as root, so do tests that
# need namespaces.
REQUIRE     := $(shell docker info >/dev/null 2>&1 && echo SHINKEN_REQUIRE_DOCKER=1) \
               $(shell [ "$$(id -u)" = 0 ] && echo SHINKEN_REQUIRE_NAMESPACES=1)

# `make test` runs its packages in two lanes, each one package at a time.
# Lane 1: envserver's end-to-end suite (the longest package), then
# rollout's. Lane 2: every other package, then the race pass and the
# Python client's tests. On two cores the lanes run one after the other
# (TEST_LANES=1): run at once, the browser's and the office suite's
# timing tests (guest's settle and tree tests, the web apps' oracles in
# envserver's task suite) failed under the load of both, and a red run
# proves nothing. TEST_LANES=2 runs them at once on a bigger host; the
# output lines then interleave.
LANE1_PKGS  := ./envserver ./rollout
TEST_LANES  ?= 1

test: deps ## run every test (Go, Go under the race detector, then Python against a real server)
	@if docker info >/dev/null 2>&1; then $(MAKE) --no-print-directory image; \
	 else echo "no Docker engine: docker provider tests will skip"; fi
	$(GO) vet ./...
	$(MAKE) --no-print-directory -j$(TEST_LANES) test-lane-1 test-lane-2

test-lane-1:
	$(REQUIRE) $(GO) test $(TEST_FLAGS) $(LANE1_PKGS)

test-lane-2:
	lane=$$($(GO) list $(LANE1_PKGS)) && pkgs=$$($(GO) list ./... | grep -vxF "$$lane") && test -n "$$pkgs" && \
	  $(REQUIRE) $(GO) test $(TEST_FLAGS) $$pkgs
	$(MAKE) --no-print-directory test-race-core test-python

test-go: ## every Go test, one package at a time
	$(GO) vet ./...
	$(REQUIRE) $(GO) test $(TEST_FLAGS) ./...

test-race-core: ## the packages with concurrency, under the race detector
	$(REQUIRE) $(GO) test -race $(TEST_FLAGS) $(RACE_PKGS)

test-python: build
	cd clients/python && SHINKEN_BIN=$(CURDIR)/$(BIN) $(PYTHON) -m pytest -q tests

test-race: deps ## run the Go tests under the race detector
	$(GO) test -race $(TEST_FLAGS) ./...

bench: deps build ## the full benchmark report (bench-out/)
	$(BIN)/bench --out bench-out

bench-quick: deps build ## a quick benchmark smoke run
	$(BIN)/bench --quick --out bench-out

FUZZTIME    ?= 20s

fuzz: ## run every fuzz target briefly ($(FUZZTIME) each), found in the test files
	@for dir in $$(grep -rl --include='*_test.go' '^func Fuzz' . | grep -v '^./_build/' | xargs -n1 dirname | sort -u); do \
	  for t in $$(grep -h '^func Fuzz' $$dir/*_test.go | sed 's/^func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
	    echo "fuzz $$dir $$t"; \
	    $(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) $$dir || exit 1; \
	  done; \
	done

lint: ## gofmt + go vet
	@test -z "$$(gofmt -l .)" || { gofmt -l .; exit 1; }
	$(GO) vet ./...

image: ## build the docker sandbox image (no registry needed)
	bash images/build.sh

image-envserver: ## build the envserver image for Kubernetes (deploy/kubernetes; no registry needed)
	@mkdir -p _build/envserver-image/bin
	CGO_ENABLED=0 $(GO) build -o _build/envserver-image/bin/ ./cmd/envserver ./cmd/guestd
	BIN=_build/envserver-image/bin sh images/build-envserver.sh

# Kubernetes tests (docs/kubernetes.md): opt-in, not part of `make test`.
# kube-apiserver, kubectl and etcd are built from deploy/kubernetes/test/kbuild
# (a module of its own) once per version into _build/k8s/<version>-<go.mod hash>.
K8S_MOD     := deploy/kubernetes/test/kbuild/go.mod
K8S_BIN     := _build/k8s/$(shell awk '$$1=="k8s.io/kubernetes"{print $$2; exit}' $(K8S_MOD))-$(shell sha256sum $(K8S_MOD) | cut -c1-8)

k8s-bin: ## build the cached Kubernetes test binaries (only when missing)
	sh deploy/kubernetes/test/build-k8s.sh $(CURDIR)/$(K8S_BIN)

test-k8s: build k8s-bin ## the manifests and client discovery against a real kube-apiserver (opt-in)
	cd deploy/kubernetes/test && SHINKEN_K8S_BIN=$(CURDIR)/$(K8S_BIN) SHINKEN_BIN=$(CURDIR)/$(BIN) \
	  SHINKEN_PYTHON=$(PYTHON) $(GO) test -count=1 -timeout 10m -v ./...

# The real single node (docs/kubernetes.md, "A real node"): root, Debian's
# containerd, runc and containernetworking-plugins; the kubelet, controller
# manager and scheduler join the cached binaries. Opt-in, outside test-k8s.
.PHONY: k8s-node-bin test-k8s-node
k8s-node-bin: ## build the cached Kubernetes binaries a real node adds (only when missing)
	sh deploy/kubernetes/test/build-k8s.sh $(CURDIR)/$(K8S_BIN) kube-apiserver kubectl etcd kubelet kube-controller-manager kube-scheduler

test-k8s-node: k8s-node-bin image-envserver ## two envserver pods on a real node: failover and a draining rolling update (opt-in, root)
	cd deploy/kubernetes/test && SHINKEN_K8S_NODE=1 SHINKEN_K8S_BIN=$(CURDIR)/$(K8S_BIN) \
	  SHINKEN_PYTHON=$(PYTHON) $(GO) test -count=1 -timeout 20m -v -run '^TestNode$$' ./...

clean:
	rm -rf $(BIN) bench-out
