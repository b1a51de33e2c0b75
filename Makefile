# The appliance's build. `make build` writes bin/appliance; `make test` is
# the test command CI runs (.ci/run).
GO        ?= go
VERSION   ?= 0.1.0
REVISION  := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
BUILDDATE := $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS   := -X main.version=$(VERSION) -X main.revision=$(REVISION) -X main.buildDate=$(BUILDDATE)

.PHONY: build web test fuzz vet fmt bench-ingest bench-dashboard clean

# The dashboard bundle (ui/web/dist, embedded by go:embed) and then the
# binary. Without `make web` the binary serves a "bundle not built" page.
build: web
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/appliance ./cmd/appliance

web:
	cd ui/web && npm ci --no-audit --no-fund && node --test src/ && node build.mjs

# Unit, integration and end-to-end tests (the e2e tests build the binary,
# with the dashboard bundle, which the browser tests drive), then every
# fuzz target for a bounded time.
test: web vet
	$(GO) test -count=1 -timeout 30m ./...
	$(MAKE) fuzz

# Go's native fuzzing, FUZZTIME per target (4 targets: about a minute of
# fuzzing plus the instrumented builds). An input that fails is written
# to the package's testdata/fuzz/<Target>/ and fails the run: fix the
# code and commit the input, which then runs as a seed in every `go test`.
# Minimizing is capped at 1s an input: at Go's default of 60s the workers
# spent a 15s budget minimizing the first new inputs and ran ~20 execs.
# With 1s, on 2 heavily shared cores, one 15s run each executed: import
# 2134 inputs, remote write 473, rule files 9060, probe streams 8093;
# `make fuzz` took 3m08s with the instrumented builds.
FUZZTIME ?= 15s
FUZZ_TARGETS := ./ui:FuzzImportParser ./ui:FuzzRemoteWrite ./rules/rulefile:FuzzParse ./probe:FuzzStreamParser

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$name ($$pkg) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 1s $$pkg; \
	done

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

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
	rm -rf bin ui/web/node_modules
	find ui/web/dist -type f ! -name .keep -delete
