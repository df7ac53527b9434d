# delayq — `make` lists the targets.
.DEFAULT_GOAL := help
GO ?= go

help: ## list the targets
	@grep -E '^[a-zA-Z/_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## build bin/delayq
	$(GO) build -o bin/delayq ./cmd/delayq

install: ## go install ./cmd/delayq: the delayq command into $(go env GOPATH)/bin
	$(GO) install ./cmd/delayq

release: ## static linux amd64/arm64 binaries, SHA256SUMS and the image context into dist/
	bash scripts/release.sh

run: ## run the server on the embedded default
	$(GO) run ./cmd/delayq serve

test: ## the whole suite, as CI runs it (installs redis/beanstalkd/php when missing)
	bash scripts/test.sh

test/short: ## unit tests without the Redis and crash tests' servers
	$(GO) test -race -short ./...

lint: ## gofmt and go vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet ./...

fuzz: ## run every fuzz target for 30s
	bash scripts/fuzz.sh 30s

bench: ## store and engine micro-benchmarks
	$(GO) test -run '^$$' -bench . -benchmem ./internal/store/diskstore/ ./internal/engine/

.PHONY: help build install release run test test/short lint fuzz bench
