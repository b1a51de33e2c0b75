package main

import "github.com/aiserve/appliance/bench/harness"

// system is one system under test: how to build and start it (System),
// and how to read how many samples it stored.
type system struct {
	harness.System
	// samplesMetric is the system's own counter of samples written to
	// storage; "samples ingested" below always means this counter.
	samplesMetric string
	// note explains the counter and anything that differs from the others.
	note string
}

var systems = []system{
	{
		System:        harness.Prometheus,
		samplesMetric: "prometheus_tsdb_head_samples_appended_total",
		note: "samples: `prometheus_tsdb_head_samples_appended_total` (all types). " +
			"Runs shorter than the 2h head block leave its data in the WAL and head chunks, " +
			"so disk per sample is what a fresh server holds, not compacted blocks.",
	},
	{
		System:        harness.VictoriaMetrics,
		samplesMetric: "vm_rows_added_to_storage_total",
		note: "samples: `vm_rows_added_to_storage_total`. Started with `-search.disableCache` " +
			"so repeated queries are not served from its rollup result cache; " +
			"its default `-search.latencyOffset=30s` hides the last 30 s from queries.",
	},
	{
		System:        harness.Appliance,
		samplesMetric: "appliance_storage_samples_appended_total",
		note:          "samples: `appliance_storage_samples_appended_total`.",
	},
}
