# The appliance's build. `make build` writes bin/appliance; `make test` is
# the test command CI runs (.ci/run).
GO        ?= go
VERSION   ?= 0.1.0
REVISION  := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
BUILDDATE := $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS   := -X main.version=$(VERSION) -X main.revision=$(REVISION) -X main.buildDate=$(BUILDDATE)

.PHONY: build web test vet fmt bench-ingest clean

# The dashboard bundle (ui/web/dist, embedded by go:embed) and then the
# binary. Without `make web` the binary serves a "bundle not built" page.
build: web
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/appliance ./cmd/appliance

web:
	cd ui/web && npm ci --no-audit --no-fund && node --test src/ && node build.mjs

# Unit, integration and end-to-end tests (the e2e tests build the binary,
# with the dashboard bundle, which the browser tests drive).
test: web vet
	$(GO) test -count=1 -timeout 30m ./...

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

clean:
	rm -rf bin ui/web/node_modules
	find ui/web/dist -type f ! -name .keep -delete
