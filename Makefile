# volrecon — see README.md.
GO ?= go
STATICCHECK_VERSION := v0.8.2
GOBIN := $(shell $(GO) env GOPATH)/bin

.PHONY: test bench lint demo update-fixtures

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

## demo: scan the embedded sample node.
demo:
	$(GO) run ./cmd/volrecon scan --demo

## update-fixtures: rewrite the golden State of every fixture (review the diff!).
update-fixtures:
	$(GO) test ./reconstruct -run TestFixtures -update
	cp testdata/ebs-current.txtar internal/fixture/demo.txtar
