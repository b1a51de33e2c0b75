package autodetect

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	promconfig "github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	yaml2 "go.yaml.in/yaml/v2"
)

// sdConfig is a Prometheus service discovery that hands out the servers of
// one kind the Detector found. It is never written in a file: the
// Detector's ScrapeConfigs builds it.
type sdConfig struct {
	d    *Detector
	kind string
}

// Name implements discovery.Config.
func (*sdConfig) Name() string { return "autodetect" }

// NewDiscoverer implements discovery.Config.
func (c *sdConfig) NewDiscoverer(discovery.DiscovererOptions) (discovery.Discoverer, error) {
	return &discoverer{d: c.d, kind: c.kind}, nil
}

// NewDiscovererMetrics implements discovery.Config.
func (*sdConfig) NewDiscovererMetrics(prometheus.Registerer, discovery.RefreshMetricsInstantiator) discovery.DiscovererMetrics {
	return &discovery.NoopDiscovererMetrics{}
}

type discoverer struct {
	d    *Detector
	kind string
}

// Run sends the kind's targets now and after every change of what the
// Detector found.
func (x *discoverer) Run(ctx context.Context, up chan<- []*targetgroup.Group) {
	for {
		targets, changed := x.d.targets(x.kind)
		tg := &targetgroup.Group{Source: "autodetect/" + x.kind, Targets: targets}
		select {
		case up <- []*targetgroup.Group{tg}:
		case <-ctx.Done():
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// ScrapeConfigs implements scrape.JobSource: one job per kind, named after
// the kind (vllm, sglang, tgi, triton, ollama, dcgm, node), whose targets
// come from the Detector. When the config file already has a job of that
// name, the job is named autodetect-<kind> and a relabelling sets its job
// label to the kind, so queries and rules by job still match.
func (d *Detector) ScrapeConfigs(global promconfig.GlobalConfig, taken func(string) bool) ([]*promconfig.ScrapeConfig, error) {
	var out []*promconfig.ScrapeConfig
	for _, kind := range Kinds {
		name := kind
		var relabel string
		if taken(name) {
			name = "autodetect-" + kind
			relabel = fmt.Sprintf("relabel_configs: [{target_label: job, replacement: %q}]\n", kind)
		}
		var sc promconfig.ScrapeConfig
		if err := yaml2.UnmarshalStrict([]byte(fmt.Sprintf("job_name: %q\n%s", name, relabel)), &sc); err != nil {
			return nil, fmt.Errorf("autodetect job %s: %w", kind, err)
		}
		if err := sc.Validate(global); err != nil {
			return nil, fmt.Errorf("autodetect job %s: %w", kind, err)
		}
		sc.ServiceDiscoveryConfigs = discovery.Configs{&sdConfig{d: d, kind: kind}}
		out = append(out, &sc)
	}
	return out, nil
}

var _ discovery.Config = (*sdConfig)(nil)
