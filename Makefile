# volrecon — see README.md.
GO ?= go
STATICCHECK_VERSION := v0.8.2
GOBIN := $(shell $(GO) env GOPATH)/bin

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: test bench lint demo build update-fixtures

## test: gofmt check, go vet, and every test with the race detector.
## As root, the tests that need real mounts run in private mount namespaces.
test:
	@unformatted="$$(gofmt -l .)"; if [ -n "$$unformatted" ]; then \
		echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -race ./...

## bench: the benchmarks, with allocations (mountscan compares against k8s.io/mount-utils).
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## lint: staticcheck at a pinned version, installed here.
lint:
	$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	$(GOBIN)/staticcheck ./...

## build: the volrecon binary, with its version.
build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o volrecon ./cmd/volrecon

## demo: scan the embedded sample node.
demo:
	$(GO) run ./cmd/volrecon scan --demo

## update-fixtures: rewrite the golden State of every fixture (review the diff!).
update-fixtures:
	$(GO) test ./reconstruct -run TestFixtures -update
	cp testdata/ebs-current.txtar internal/fixture/demo.txtar
	$(GO) test ./cmd/volrecon -run 'Golden' -update
