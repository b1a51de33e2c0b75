package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/aiserve/appliance/bench/harness"
)

// Versions of the anchors. Bumping one rebuilds it on the next run.
const (
	prometheusVersion      = "v0.316.0"
	victoriaMetricsVersion = "v1.151.0"
)

// system is one system under test: how to build it, start it against a
// scrape config, tell when it is up, and read how many samples it stored.
type system struct {
	name  string // as in -only
	title string // column header

	// build returns the path of the binary, building it if needed.
	build func(ctx context.Context, root, binDir string, log io.Writer) (string, error)
	// args returns the command line for a fresh data dir and listen address.
	args func(config, dataDir, addr string) []string
	// readyPath answers 200 once the system serves queries.
	readyPath string
	// samplesMetric is the system's own counter of samples written to
	// storage; "samples ingested" below always means this counter.
	samplesMetric string
	// note explains the counter and anything that differs from the others.
	note string
}

var systems = []system{
	{
		name:  "prometheus",
		title: "Prometheus " + prometheusVersion,
		build: func(ctx context.Context, _, binDir string, log io.Writer) (string, error) {
			return harness.GoInstall(ctx, binDir, "github.com/prometheus/prometheus/cmd/prometheus", prometheusVersion, log)
		},
		args: func(config, dataDir, addr string) []string {
			return []string{
				"--config.file=" + config,
				"--storage.tsdb.path=" + dataDir,
				"--web.listen-address=" + addr,
			}
		},
		readyPath:     "/-/ready",
		samplesMetric: "prometheus_tsdb_head_samples_appended_total",
		note: "samples: `prometheus_tsdb_head_samples_appended_total` (all types). " +
			"Runs shorter than the 2h head block leave its data in the WAL and head chunks, " +
			"so disk per sample is what a fresh server holds, not compacted blocks.",
	},
	{
		name:  "victoriametrics",
		title: "VictoriaMetrics " + victoriaMetricsVersion,
		build: func(ctx context.Context, _, binDir string, log io.Writer) (string, error) {
			return harness.GoInstall(ctx, binDir, "github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics", victoriaMetricsVersion, log)
		},
		args: func(config, dataDir, addr string) []string {
			return []string{
				"-promscrape.config=" + config,
				"-storageDataPath=" + dataDir,
				"-httpListenAddr=" + addr,
				// The rollup result cache would answer repeats of the same
				// query from memory; Prometheus and the appliance have no
				// such cache, so time every run from storage.
				"-search.disableCache",
			}
		},
		readyPath:     "/health",
		samplesMetric: "vm_rows_added_to_storage_total",
		note: "samples: `vm_rows_added_to_storage_total`. Started with `-search.disableCache` " +
			"so repeated queries are not served from its rollup result cache; " +
			"its default `-search.latencyOffset=30s` hides the last 30 s from queries.",
	},
	{
		name:  "appliance",
		title: "appliance",
		build: func(ctx context.Context, root, binDir string, log io.Writer) (string, error) {
			bin := filepath.Join(binDir, "appliance")
			if err := harness.GoBuild(ctx, root, "./cmd/appliance", bin, log); err != nil {
				return "", fmt.Errorf("build the appliance: %w", err)
			}
			return bin, nil
		},
		args: func(config, dataDir, addr string) []string {
			return []string{"run", "--config", config, "--data", dataDir, "--listen", addr}
		},
		readyPath:     "/-/ready",
		samplesMetric: "appliance_storage_samples_appended_total",
		note:          "samples: `appliance_storage_samples_appended_total`.",
	},
}

func systemByName(name string) (system, bool) {
	for _, s := range systems {
		if s.name == name {
			return s, true
		}
	}
	return system{}, false
}
