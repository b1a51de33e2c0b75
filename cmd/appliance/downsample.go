package main

import (
	"context"
	"net/http"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/downsample"
	"github.com/aiserve/appliance/ui"
)

// The downsampler rolls raw data up into the 1m and 5m tiers. It runs
// before the other parts (rank 5) and, like them, stops before the storage
// closes. The HTTP side reads per-request max_source_resolution and says
// which tiers served a query.
func init() {
	partBuilders = append(partBuilders, partBuilder{rank: 5, build: buildDownsample})
}

type downsamplePart struct{ d *downsample.Downsampler }

func buildDownsample(a *appliance, _ *config.Config) (part, error) {
	opts := downsample.DefaultOptions()
	opts.Logger = a.logger.With("component", "downsample")
	opts.Registerer = a.reg // its metrics are named appliance_downsample_*
	d, err := downsample.New(a.db, opts)
	if err != nil {
		return nil, err
	}
	a.uiExtra = append(a.uiExtra, func(o *ui.Options) {
		o.Middleware = append(o.Middleware, ui.TiersMiddleware)
		if o.Handlers == nil {
			o.Handlers = map[string]http.Handler{}
		}
		o.Handlers["/api/v1/status/tiers"] = ui.TierStatsHandler(a.db)
	})
	return &downsamplePart{d: d}, nil
}

func (p *downsamplePart) name() string { return "downsample" }

func (p *downsamplePart) run(ctx context.Context) error {
	defer p.d.Close()
	return p.d.Run(ctx)
}

// applyConfig has nothing to apply: retention changes need a restart, and
// reload says so.
func (p *downsamplePart) applyConfig(*config.Config) error { return nil }
