# The appliance's build. `make build` writes bin/appliance; `make test` is
# the test command CI runs (.ci/run); `make release` writes the release
# archives into dist/.
GO        ?= go
# The version: the nearest v* tag (v1.2.3 -> 1.2.3, with -N-gHASH past it),
# else the Makefile's.
VERSION   ?= $(or $(patsubst v%,%,$(shell git describe --tags --match 'v[0-9]*' 2>/dev/null)),0.1.0)
REVISION  := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
BUILDDATE := $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS   := -X main.version=$(VERSION) -X main.revision=$(REVISION) -X main.buildDate=$(BUILDDATE)

.PHONY: build web test fuzz vet fmt bench-ingest bench-dashboard clean release release-archives

# The dashboard bundle (ui/web/dist, embedded by go:embed) and then the
# binary. Without `make web` the binary serves a "bundle not built" page.
build: web
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/appliance ./cmd/appliance

web:
	cd ui/web && npm ci --no-audit --no-fund && node --test src/ && node build.mjs

# Unit, integration and end-to-end tests (the e2e tests build the binary,
# with the dashboard bundle, which the browser tests drive), then every
# fuzz target for a bounded time. The timeout leaves room for a first
# run that builds Thanos for the hub test (minutes, once; cached after).
test: web vet
	$(GO) test -count=1 -timeout 45m ./...
	$(MAKE) fuzz

# Go's native fuzzing, FUZZTIME per target (4 targets: about a minute of
# fuzzing plus the instrumented builds). An input that fails is written
# to the package's testdata/fuzz/<Target>/ and fails the run: fix the
# code and commit the input, which then runs as a seed in every `go test`.
# Minimizing is capped at 1s an input: at Go's default of 60s the workers
# spent a 15s budget minimizing the first new inputs and ran ~20 execs.
# With 1s, on 2 heavily shared cores, one 15s run each executed: import
# 2134 inputs, remote write 473, rule files 9060, probe streams 8093;
# `make fuzz` took 3m08s with the instrumented builds. .ci/fuzz runs
# one target (and says what it does about golang/go#52569).
FUZZTIME ?= 15s
FUZZ_TARGETS := ./ui:FuzzImportParser ./ui:FuzzRemoteWrite ./rules/rulefile:FuzzParse ./probe:FuzzStreamParser

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		GO=$(GO) .ci/fuzz $$pkg $$name $(FUZZTIME); \
	done

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

# Release archives: one appliance-VERSION-OS-ARCH.tar.gz per platform
# (a static binary, CGO off, with the dashboard bundle; the systemd unit,
# the container file and the README), and SHA256SUMS, in DIST.
# release-archives skips the bundle's build (packaging/release_test.go
# runs it for linux/arm64 alone).
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/arm64
DIST              ?= dist

release: web release-archives

release-archives:
	@set -e; mkdir -p $(DIST); rm -f $(DIST)/appliance-*.tar.gz $(DIST)/SHA256SUMS; \
	for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; name=appliance-$(VERSION)-$$os-$$arch; \
		echo "build $$name"; \
		mkdir -p $(DIST)/$$name; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "$(LDFLAGS) -s -w" -o $(DIST)/$$name/appliance ./cmd/appliance; \
		cp README.md packaging/appliance.service packaging/Containerfile $(DIST)/$$name/; \
		tar -C $(DIST) --owner=0 --group=0 --numeric-owner -czf $(DIST)/$$name.tar.gz $$name; \
		rm -rf $(DIST)/$$name; \
	done; \
	cd $(DIST) && sha256sum *.tar.gz > SHA256SUMS && cat SHA256SUMS

# Side-by-side ingest benchmark against Prometheus and VictoriaMetrics
# (builds both from the Go module proxy on first use). See bench/README.md.
bench-ingest:
	$(GO) run ./bench/ingest $(ARGS)

# The dashboard's Overview against vmui in headless Chromium over the same
# ~100,000 series and 90 days (builds the bundle first: it is embedded).
# See bench/README.md, "Dashboard benchmark".
bench-dashboard: web
	$(GO) run ./bench/dashboard $(ARGS)

clean:
	rm -rf bin dist ui/web/node_modules
	find ui/web/dist -type f ! -name .keep -delete
