package query

import (
	"testing"

	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"
)

// testFeatures are the language features Prometheus' own test files are
// written for (promqltest.NewTestEngine's).
var testFeatures = features{
	parser:             promqltest.TestParserOpts,
	delayedNameRemoval: true,
	startTimestamps:    true,
}

// TestPromQLCompliance runs Prometheus' own PromQL test files
// (promqltest's built-in suite, every file, every eval) through the
// appliance's query engine: its limits, concurrency slots, deadlines and
// the split of range queries into parts that run at once, so a change to
// how the engine runs a query is checked against the suite. Two engines:
// one as configured by default, and one that splits every range query of
// four steps or more into up to four parts of two steps or more, so the joining of parts meets
// every function, aggregation, `@` and offset case of the suite. The
// data is Prometheus' test storage (the suite loads native histograms
// and samples at 1970, which the appliance's storage refuses); the tier
// read is checked by package storage's and downsample's accuracy tests.
func TestPromQLCompliance(t *testing.T) {
	newStorage := func(t testing.TB) storage.Storage { return promqltest.NewBuiltinTestStorage(t) }
	t.Run("default", func(t *testing.T) {
		eng := newEngine(Options{MaxSamples: promqltest.DefaultMaxSamplesPerQuery}, nil, nil, testFeatures)
		t.Cleanup(func() { _ = eng.Close() })
		promqltest.RunBuiltinTestsWithStorage(t, eng, newStorage)
		t.Logf("pushdown: %d range queries pushed down, %d fell back", eng.pushed.Load(), eng.fellBack.Load())
		require.Positive(t, eng.pushed.Load(), "the aggregation pushdown is on by default")
	})
	t.Run("split", func(t *testing.T) {
		eng := newEngine(Options{MaxSamples: promqltest.DefaultMaxSamplesPerQuery, SplitParallelism: 4}, nil, nil, testFeatures)
		eng.minSplitSteps = 2 // a part of one step would run as an instant query
		eng.minSplitRange = 0
		t.Cleanup(func() { _ = eng.Close() })
		promqltest.RunBuiltinTestsWithStorage(t, eng, newStorage)
		require.Positive(t, eng.pushed.Load(), "the parts of split queries are pushed down")
	})
	t.Run("no-pushdown", func(t *testing.T) {
		eng := newEngine(Options{MaxSamples: promqltest.DefaultMaxSamplesPerQuery, NoPushdown: true}, nil, nil, testFeatures)
		t.Cleanup(func() { _ = eng.Close() })
		promqltest.RunBuiltinTestsWithStorage(t, eng, newStorage)
		require.Zero(t, eng.pushed.Load()+eng.fellBack.Load())
	})
}
