# volrecon — see README.md.
GO ?= go
STATICCHECK_VERSION := v0.8.2
GOBIN := $(shell $(GO) env GOPATH)/bin

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The image's labels: the commit and its time (so that the same commit gives
# the same image, byte for byte), and where the source is.
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
COMMIT_TIME ?= $(shell git log -1 --format=%cI 2>/dev/null)
IMAGE_SOURCE ?= https://github.com/volrecon/volrecon
# make image: the reference the tarball names, and the tarball.
IMAGE ?= volrecon:$(VERSION)
IMAGE_TAR ?= volrecon-image.tar
comma := ,

# Modules of their own that use the library as an importer does, through a
# replace of it: examples/agent (a kubelet-like agent and its unit tests on
# fake nodes, public API only).
EXAMPLE_MODULES := examples/agent

# Modules of their own beside the library's, whose test-only dependencies
# an importer of volrecon never sees: deploy/ (the manifests' tests, with
# Prometheus's rule parser), bench/ (the peer parsers) and image/ (make
# image, with go-containerregistry); schema/ has its own target
# (test-schema). e2e/ is apart.
TEST_MODULES := deploy bench image

# The newest versions the library is tested against (go.mod requires the
# oldest that work, and `make test` tests those): `make test-newest`.
NEWEST := k8s.io/api@v0.37.2 k8s.io/apimachinery@v0.37.2 k8s.io/client-go@v0.37.2 \
	k8s.io/cri-api@v0.37.2 k8s.io/mount-utils@v0.37.2 k8s.io/klog/v2@v2.140.0 \
	k8s.io/utils@v0.0.0-20261023123148-ca04ba58ecab \
	github.com/prometheus/client_golang@v1.25.0 google.golang.org/grpc@v1.84.0 \
	google.golang.org/protobuf@v1.36.12 github.com/container-storage-interface/spec@v1.13.0 \
	github.com/stretchr/testify@v1.12.1 golang.org/x/sys@v0.49.0 github.com/go-logr/logr@v1.4.4

.PHONY: helm packaging-tools image-multiarch release test test-rules test-busy test-schema test-examples test-newest bench lint demo build image update-fixtures fuzz e2e chaos serve-diff

## test: gofmt check, go vet, and every test with the race detector, of the
## library at the oldest versions it requires (go.mod), of TEST_MODULES,
## the rules' in the real promtool (test-rules), the schema's and the
## examples'.
## As root, the tests that need real mounts run in private mount namespaces.
test:
	@unformatted="$$(gofmt -l .)"; if [ -n "$$unformatted" ]; then \
		echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -race ./...
	$(MAKE) packaging-tools
	for m in $(TEST_MODULES); do (cd $$m && $(GO) vet ./... && VOLRECON_HELM=$(HELM) $(GO) test -race ./...) || exit 1; done
	$(MAKE) test-rules
	$(MAKE) test-schema
	$(MAKE) test-examples

## test-rules: deploy/alerts.yaml in the real promtool: promtool check rules,
## then promtool test rules deploy/alerts_test.yaml. promtool is Debian 12's
## (package prometheus, PROMETHEUS_VERSION, as the e2e suite's Prometheus),
## installed as the e2e suite installs its packages when it is missing
## (apt-get, as root; policy-rc.d keeps the service from starting); another
## version is an error, so that what passed is known.
PROMETHEUS_VERSION := 2.42.0
test-rules: SHELL := bash
test-rules: .SHELLFLAGS := -eu -o pipefail -c
test-rules:
	installed() { dpkg-query -W -f='$${db:Status-Status} $${Version}' prometheus 2>/dev/null | sed -n 's/^installed //p'; }; \
	if [ -z "$$(installed)" ]; then \
		rc=/usr/sbin/policy-rc.d; \
		if [ ! -e "$$rc" ]; then printf '#!/bin/sh\nexit 101\n' > "$$rc"; chmod 0755 "$$rc"; trap 'rm -f "$$rc"' EXIT; fi; \
		DEBIAN_FRONTEND=noninteractive apt-get update -q; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus; \
	fi; \
	version="$$(installed)"; \
	case "$$version" in $(PROMETHEUS_VERSION)+*) ;; \
	*) echo "prometheus $$version is installed; make test-rules runs Debian 12's $(PROMETHEUS_VERSION)" >&2; exit 1;; esac; \
	promtool --version 2>&1 | head -1; \
	cd deploy && promtool check rules alerts.yaml && promtool test rules alerts_test.yaml

## helm: the real helm, built from its Go module at HELM_VERSION (as the
## e2e suite builds the kubelet) into the e2e suite's cache, once: deploy/'s
## tests lint and render deploy/helm/volrecon with it (VOLRECON_HELM), and
## the e2e suite installs the chart with it (TestHelm).
HELM_VERSION := v3.21.4
HELM_DIR := /var/cache/volrecon-e2e/bin/helm-$(HELM_VERSION)-$(shell $(GO) env GOVERSION)
HELM := $(HELM_DIR)/helm
helm: $(HELM)
$(HELM):
	mkdir -p $(HELM_DIR)
	GOBIN=$(HELM_DIR) GOFLAGS=-buildvcs=false $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

## test-busy: the tests of BUSY_PACKAGES (those that read every process's
## mount namespaces, and the mount churn test) with the race detector,
## BUSY_COUNT times (default 1), beside a mount churn of their own, as root
## (testkit/churn): BUSY_NAMESPACES mount namespaces (default 4), each
## mounting BUSY_MOUNTS tmpfs and binds (default 5000), unmounting them and
## again, from before the tests start until they end. The timeouts are
## guards against a hang only.
BUSY_PACKAGES := ./liveness ./cleanup ./internal/mountnamespaces/... ./cmd/volrecon
test-busy: BUSY_COUNT ?= 1
test-busy: BUSY_NAMESPACES ?= 4
test-busy: BUSY_MOUNTS ?= 5000
test-busy:
	$(GO) run ./testkit/churn -namespaces $(BUSY_NAMESPACES) -mounts $(BUSY_MOUNTS) -max-duration 4h -- \
		$(GO) test -race -count=$(BUSY_COUNT) -timeout 3h $(BUSY_PACKAGES)

## test-examples: each module of EXAMPLE_MODULES built, vetted and tested.
test-examples:
	for m in $(EXAMPLE_MODULES); do (cd $$m && $(GO) vet ./... && $(GO) test -race ./...) || exit 1; done

## test-schema: schema/volrecon.v1.json against the goldens, the command's
## -o json output and the Go types (module schema/, so that its JSON Schema
## validator never reaches an importer's build).
test-schema:
	cd schema && $(GO) vet ./... && $(GO) test -race ./...

## test-newest: the library built and tested (without the race detector)
## against the NEWEST versions of its dependencies, through a copy of go.mod
## upgraded in a temp dir (-modfile): the repository's go.mod is untouched.
test-newest: SHELL := bash
test-newest: .SHELLFLAGS := -eu -o pipefail -c
test-newest:
	dir="$$(mktemp -d)"; trap 'rm -rf "$$dir"' EXIT; \
	cp go.mod "$$dir/go.mod"; cp go.sum "$$dir/go.sum"; \
	$(GO) get -modfile="$$dir/go.mod" $(NEWEST); \
	$(GO) mod tidy -modfile="$$dir/go.mod"; \
	$(GO) list -modfile="$$dir/go.mod" -m $(foreach m,$(NEWEST),$(firstword $(subst @, ,$(m)))); \
	$(GO) vet -modfile="$$dir/go.mod" ./...; \
	$(GO) test -modfile="$$dir/go.mod" ./...

## bench: every benchmark with allocations, the library's then the peer parsers'
## (module bench/), BENCH_COUNT runs each (default 1), saved in BENCH_OUT
## (bench.out), then the ratios of BENCHMARKS.md (testkit/benchratio).
## The kubelet-style baseline alone takes minutes per run. Compare two outputs with benchstat.
bench: SHELL := bash
bench: .SHELLFLAGS := -o pipefail -c
bench: BENCH_COUNT ?= 1
bench: BENCH_OUT ?= bench.out
bench:
	{ $(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) -timeout 0 ./... && \
	  (cd bench && $(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) -timeout 0 ./...); } | tee $(BENCH_OUT)
	$(GO) run ./testkit/benchratio < $(BENCH_OUT)

## lint: staticcheck at a pinned version, installed here.
lint:
	$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	$(GOBIN)/staticcheck ./...
	for m in $(TEST_MODULES) schema $(EXAMPLE_MODULES) e2e; do (cd $$m && $(GO) vet ./... && $(GOBIN)/staticcheck ./...) || exit 1; done

## build: the volrecon binary, static (CGO_ENABLED=0: it runs on any Linux
## and in an image with no libc), with its version; -trimpath so that the
## same commit gives the same binary wherever it is cloned.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-X main.version=$(VERSION) -X main.commit=$(REVISION)" -o volrecon ./cmd/volrecon

## image: the container image, from the static binary, with no registry and
## no daemon (module image/): IMAGE_TAR, a tarball for `ctr -n k8s.io images
## import` or `docker load`, naming IMAGE. The same commit gives the same
## digest. See docs/fleet.md, "Fleet".
image: build
	cd image && $(GO) run . -binary $(abspath volrecon) -out $(abspath $(IMAGE_TAR)) -tag $(IMAGE) \
		-version $(VERSION) -revision "$(REVISION)" -created "$(COMMIT_TIME)" \
		-source $(IMAGE_SOURCE) -arch $$($(GO) env GOARCH)

## image-multiarch: the image for IMAGE_ARCHES (linux/amd64 and
## linux/arm64) in one OCI image index, from a static binary of each
## (CGO_ENABLED=0; make image refuses a binary of another architecture),
## as an OCI layout tar, IMAGE_OCI, named IMAGE: push it with
## `skopeo copy --all oci-archive:$(IMAGE_OCI):$(IMAGE) docker://REGISTRY/volrecon:TAG`.
IMAGE_OCI ?= volrecon-image-oci.tar
IMAGE_ARCHES := amd64 arm64
image-multiarch:
	mkdir -p dist/image
	for a in $(IMAGE_ARCHES); do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$a $(GO) build -trimpath -ldflags "-X main.version=$(VERSION) -X main.commit=$(REVISION)" \
			-o dist/image/volrecon-linux-$$a ./cmd/volrecon || exit 1; done
	cd image && $(GO) run . -index $(subst $(eval) ,$(comma),$(foreach a,$(IMAGE_ARCHES),$(a)=$(abspath dist/image/volrecon-linux-$(a)))) \
		-out $(abspath $(IMAGE_OCI)) -tag $(IMAGE) -version $(VERSION) -revision "$(REVISION)" -created "$(COMMIT_TIME)" \
		-source $(IMAGE_SOURCE)

## release: VERSION's archives in DIST (default dist/release): for each
## platform a tar.gz of the binary, LICENSE and README.md (volrecon for
## RELEASE_PLATFORMS, kubectl-volrecon for PLUGIN_PLATFORMS too), static
## (CGO_ENABLED=0), the same bytes from the same commit (sorted, root-owned,
## the commit's time, gzip -n); sha256sums of them; and volrecon.yaml, the
## krew manifest of deploy/krew/volrecon.yaml with VERSION and each
## archive's sha256 from sha256sums. VERSION must be vX.Y.Z.
DIST ?= dist/release
RELEASE_PLATFORMS := linux/amd64 linux/arm64
PLUGIN_PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
release: SHELL := bash
release: .SHELLFLAGS := -eu -o pipefail -c
release:
	[[ "$(VERSION)" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$$ ]] || { echo "make release: VERSION=$(VERSION) is not vX.Y.Z" >&2; exit 1; }
	[ -n "$(DIST)" ] && rm -rf $(DIST) && mkdir -p $(DIST)
	stage="$$(mktemp -d)"; trap 'rm -rf "$$stage"' EXIT; \
	mtime="$$(git log -1 --format=%ct 2>/dev/null || echo 0)"; \
	pack() { bin=$$1; pkg=$$2; os=$${3%/*}; arch=$${3#*/}; name=$${bin}_$(VERSION)_$${os}_$${arch}; \
		mkdir -p "$$stage/$$name"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "-X main.version=$(VERSION) -X main.commit=$(REVISION)" -o "$$stage/$$name/$$bin" $$pkg; \
		cp LICENSE README.md "$$stage/$$name/"; \
		tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@$$mtime --format=gnu \
			-C "$$stage/$$name" -cf - $$bin LICENSE README.md | gzip -n -9 > $(DIST)/$$name.tar.gz; }; \
	for p in $(RELEASE_PLATFORMS); do pack volrecon ./cmd/volrecon $$p; done; \
	for p in $(PLUGIN_PLATFORMS); do pack kubectl-volrecon ./cmd/kubectl-volrecon $$p; done
	cd $(DIST) && sha256sum *.tar.gz > sha256sums
	cd deploy && $(GO) run ./internal/krewgen -template krew/volrecon.yaml -sums $(abspath $(DIST))/sha256sums \
		-version $(VERSION) -out $(abspath $(DIST))/volrecon.yaml
	cat $(DIST)/sha256sums

## packaging-tools: what the packaging tests run, pinned, installed when
## missing (as test-rules installs promtool): Debian 12's skopeo
## (SKOPEO_VERSION: it reads make image-multiarch's archive) and
## prometheus-node-exporter (NODE_EXPORTER_VERSION: it reads serve
## --textfile's file), and helm (make helm).
SKOPEO_VERSION := 1.9.3+ds1-1+b10
NODE_EXPORTER_VERSION := 1.5.0-1+b6
packaging-tools: SHELL := bash
packaging-tools: .SHELLFLAGS := -eu -o pipefail -c
packaging-tools: helm
	installed() { dpkg-query -W -f='$${db:Status-Status} $${Version}' $$1 2>/dev/null | sed -n 's/^installed //p'; }; \
	if [ "$$(installed skopeo)" != "$(SKOPEO_VERSION)" ] || [ "$$(installed prometheus-node-exporter)" != "$(NODE_EXPORTER_VERSION)" ]; then \
		rc=/usr/sbin/policy-rc.d; \
		if [ ! -e "$$rc" ]; then printf '#!/bin/sh\nexit 101\n' > "$$rc"; chmod 0755 "$$rc"; trap 'rm -f "$$rc"' EXIT; fi; \
		DEBIAN_FRONTEND=noninteractive apt-get update -q; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
			skopeo=$(SKOPEO_VERSION) prometheus-node-exporter=$(NODE_EXPORTER_VERSION); \
	fi; \
	skopeo --version; prometheus-node-exporter --version 2>&1 | head -1

## demo: scan the embedded sample nodes: a healthy one, then one with an
## orphan still mounted (--demo=orphan).
demo:
	$(GO) run ./cmd/volrecon scan --demo
	$(GO) run ./cmd/volrecon scan --demo=orphan

## update-fixtures: rewrite the golden State of every fixture (review the diff!).
update-fixtures:
	$(GO) test ./reconstruct -run TestFixtures -update
	$(GO) test ./cleanup -run TestFixturePlans -update
	cp fakenode/testdata/ebs-current.txtar fixture/demo.txtar
	cp fakenode/testdata/a1-orphan-still-mounted.txtar fixture/demo-orphan.txtar
	cp fakenode/testdata/a7-leaked-staging.txtar fixture/demo-leaked-staging.txtar
	cp fakenode/testdata/c26-hung-nfs.txtar fixture/demo-hung.txtar
	$(GO) test ./cmd/volrecon -run 'Golden' -update
	cd deploy && $(GO) test . -run TestPrometheusRuleIsAlertsYAML -update

## fuzz: run each fuzz target for FUZZTIME (a duration, or Nx executions as CI
## does: a time limit can end a loaded run with "context deadline exceeded"),
## one at a time (go test takes one
## -fuzz target per run). Inputs that fail land in <pkg>/testdata/fuzz/<Fuzz>/.
fuzz: FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./mountscan
	$(GO) test -run '^$$' -fuzz '^FuzzUnescape$$' -fuzztime $(FUZZTIME) ./mountscan
	$(GO) test -run '^$$' -fuzz '^FuzzReadVolData$$' -fuzztime $(FUZZTIME) ./podsdir
	$(GO) test -run '^$$' -fuzz '^FuzzDecodePlainVolData$$' -fuzztime $(FUZZTIME) ./podsdir
	$(GO) test -run '^$$' -fuzz '^FuzzScanTree$$' -fuzztime $(FUZZTIME) ./cleanup
	$(GO) test -run '^$$' -fuzz '^FuzzQuote$$' -fuzztime $(FUZZTIME) ./safetext

## serve-diff: the differential test of serve's incremental path
## (TestServeMatchesScan, as root, on real mounts in a private mount
## namespace): STEPS random changes of a node (default 10000) from SEED
## (default 0: from the clock), each compared, once it settled, with a
## fresh scan, field by field; a failure names its seed and step, and
## `make serve-diff SEED=... STEPS=...` replays it. make test runs its
## short form (300 steps). See RELIABILITY.md.
serve-diff: STEPS ?= 10000
serve-diff: SEED ?= 0
serve-diff:
	$(GO) test -count=1 -timeout 0 -v -run '^TestServeMatchesScan$$' ./serve -args -seed=$(SEED) -steps=$(STEPS)

## e2e: the end-to-end suite against a real kubelet, API server, containerd and
## CSI driver on 127.0.0.1 (as root; installs Debian packages, builds Kubernetes
## once into /var/cache/volrecon-e2e). See e2e/README.md.
e2e:
	cd e2e && $(GO) test -v -count=1 -timeout 40m ./...

## chaos: issue 22's seeded chaos run on the e2e suite's real kubelet (as
## root): CYCLES cycles of faults (default 100) from SEED (default 1), for
## the kubelet alone and with volrecon's remediation (ARMS, default both),
## DURATION bounding the wall time of each arm (a Go duration, default none).
## The figures go to REPORT.json and REPORT.md (default: the run's log dir).
## make e2e runs its short form (3 cycles). See e2e/README.md, RELIABILITY.md.
chaos: SEED ?= 1
chaos: CYCLES ?= 100
chaos:
	cd e2e && VOLRECON_CHAOS_SEED=$(SEED) VOLRECON_CHAOS_CYCLES=$(CYCLES) VOLRECON_CHAOS_DURATION=$(DURATION) \
		VOLRECON_CHAOS_ARMS=$(ARMS) VOLRECON_CHAOS_REPORT=$(REPORT) \
		$(GO) test -v -count=1 -run '^TestChaos$$' -timeout 0 .
