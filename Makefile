# The two commands of the README:
#   make dev    run unyo on this machine (root, a cluster and an agent, embedded stores)
#   make test   run the whole test suite (as root it apt-get installs what the tests need)
GO ?= go
BIN := bin/unyo

# The version every binary reports (unyo version, --version, status, nodes
# ls): the release tag, or tag-commits-hash, "-dirty" with local changes.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
BUILD_DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
VPKG := github.com/unyo-ops/unyo/core/version
LDFLAGS := -s -w -X $(VPKG).version=$(VERSION) -X $(VPKG).revision=$(REVISION) -X $(VPKG).buildDate=$(BUILD_DATE)

.PHONY: dev build test deps lint bench proto fuzz dist man

dev: build
	./$(BIN) dev --config configs/dev.yaml

# The binary, the agent's own binary unyo-agent (`unyo agent` without the
# servers' packages, for nodes: see README's "The agent's footprint"), and
# beside them the bundled provider-exec, which `unyo dev`
# enables for its agent so that RegionServices run on this machine, and
# the other providers: docker (containers through a node's dockerd), vpp
# (load balancers in VPP's lb plugin), xdp (load balancers in XDP) and
# libvirt (VMs; it links libvirt through cgo, so it is built only with cgo
# and libvirt-dev, and left out saying why otherwise).
build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/unyo
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/unyo-agent ./cmd/unyo-agent
	$(GO) build -trimpath -o bin/unyo-provider-exec ./plugins/provider-exec
	$(GO) build -trimpath -o bin/unyo-provider-docker ./plugins/provider-docker
	$(GO) build -trimpath -o bin/unyo-provider-vpp ./plugins/provider-vpp
	$(GO) build -trimpath -o bin/unyo-provider-xdp ./plugins/provider-xdp
	@if GO=$(GO) bash integration/dist/have-libvirt.sh; then \
		echo "$(GO) build -trimpath -o bin/unyo-provider-libvirt ./plugins/provider-libvirt"; \
		$(GO) build -trimpath -o bin/unyo-provider-libvirt ./plugins/provider-libvirt; \
	else \
		echo "make build: bin/unyo-provider-libvirt left out (see above); everything else is built" >&2; \
	fi

# The man pages, generated from the command tree (unyo.1, unyo-apply.1, ...).
man: build
	rm -rf bin/man && ./$(BIN) man --dir bin/man

# A release: dist/unyo-VERSION-linux-ARCH.tar.gz (the binary, bundled
# plugins, example configurations, systemd units, Prometheus rules, man
# pages) and Debian packages built with nfpm (a Go module; see
# integration/dist/nfpm.yaml). ARCH follows GOARCH.
dist: build man
	VERSION=$(VERSION) GO=$(GO) bash integration/dist/dist.sh

deps:
	@bash integration/install-deps.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# The integration package takes about 20 minutes on a quiet 2-core machine
# and ran past 30 on a loaded one: the per-package timeout leaves it room
# within CI's 90.
test: deps lint
	$(GO) test -race -count=1 -timeout 50m ./...
	$(MAKE) fuzz

# Every fuzz target for a bounded time: the API targets (random and mutated
# requests through the real cluster and root handlers) FUZZTIME each, the
# parsers FUZZTIME_SMALL each; about 90 s of fuzzing in all. A failure leaves
# its input under the package's testdata/fuzz, where `go test` replays it.
FUZZTIME ?= 20s
FUZZTIME_SMALL ?= 6s
FUZZ_API := ./core/cluster:FuzzClusterAPI ./core/root:FuzzRootAPI
FUZZ_SMALL := ./checks:FuzzCompile ./checks/nagios:FuzzParse ./checks/nagios:FuzzParseRange \
	./eventrules:FuzzCompileMatches ./eventrules:FuzzTemplates ./core/logtail:FuzzParse \
	./core/spool:FuzzRecover ./core/spool:FuzzOpenGarbage

fuzz:
	@GO=$(GO) bash integration/fuzz.sh $(FUZZTIME) $(FUZZ_API)
	@GO=$(GO) bash integration/fuzz.sh $(FUZZTIME_SMALL) $(FUZZ_SMALL)

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...

# Regenerate the committed protobuf code (needs protoc, protoc-gen-go and
# protoc-gen-connect-go on the PATH; see the README's Development section).
proto:
	$(GO) generate ./core/api ./plugins/proto/...
