# The two commands of the README:
#   make dev    run unyo on this machine (root, a cluster and an agent, embedded stores)
#   make test   run the whole test suite (as root it apt-get installs what the tests need)
GO ?= go
BIN := bin/unyo

.PHONY: dev build test deps lint bench proto

dev: build
	./$(BIN) dev

build:
	$(GO) build -o $(BIN) ./cmd/unyo

deps:
	@bash integration/install-deps.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

test: deps lint
	$(GO) test -race -count=1 -timeout 30m ./...

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...

# Regenerate the committed protobuf code (needs protoc, protoc-gen-go and
# protoc-gen-connect-go on the PATH; see the README's Development section).
proto:
	$(GO) generate ./core/api
