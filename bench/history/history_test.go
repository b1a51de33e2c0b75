package history

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"github.com/stretchr/testify/require"
)

func testConfig(seed uint64) Config {
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	return Config{Models: 2, Instances: 2, Start: end.Add(-5 * 24 * time.Hour), End: end, Interval: 15 * time.Second, Seed: seed}
}

func TestGenHistogramsCumulativeAndCountersMonotone(t *testing.T) {
	g := New(testConfig(1))
	require.Equal(t, 4*SeriesPerGroup, g.NumSeries())
	require.Equal(t, int64(5*24*240), g.NumSteps())

	prev := make([]float64, g.NumSeries())
	var steps int64
	resets := 0
	spikes := 0
	for {
		_, ok := g.Next()
		if !ok {
			break
		}
		steps++
		for gi := range g.groups {
			v := g.values[gi*SeriesPerGroup : (gi+1)*SeriesPerGroup]
			p := prev[gi*SeriesPerGroup : (gi+1)*SeriesPerGroup]
			for i := 1; i < nBucketSeries; i++ {
				require.LessOrEqual(t, v[sBucket0+i-1], v[sBucket0+i], "buckets are cumulative")
			}
			require.Equal(t, v[sCount], v[sBucket0+nBucketSeries-1], "+Inf equals _count")
			require.Equal(t, v[sCount], v[sSuccessStop]+v[sSuccessLen]+v[sSuccessAbort], "successes sum to _count")
			if v[sCount] < p[sCount] {
				resets++
				for i := 0; i < nCounters; i++ {
					require.LessOrEqual(t, v[i], p[i], "a restart resets every counter of the group")
				}
			} else {
				for i := 0; i < nCounters; i++ {
					require.GreaterOrEqual(t, v[i], p[i], "counters only grow between restarts")
				}
			}
			if v[sWaiting] >= 30 {
				spikes++
			}
			require.GreaterOrEqual(t, v[sKVCache], 0.0)
			require.LessOrEqual(t, v[sKVCache], 1.0)
			copy(p, v)
		}
	}
	require.Equal(t, g.NumSteps(), steps)
	require.Positive(t, resets, "5 days × 4 groups should see counter resets")
	require.Positive(t, spikes, "and queue spikes")
}

func render(cfg Config, f Format) []byte {
	g := New(cfg)
	var buf []byte
	for {
		t, ok := g.Next()
		if !ok {
			return buf
		}
		buf = g.AppendStep(buf, t, f)
	}
}

func TestGenDeterministic(t *testing.T) {
	cfg := testConfig(7)
	cfg.Start = cfg.End.Add(-6 * time.Hour)
	a, b := render(cfg, FormatPrometheus), render(cfg, FormatPrometheus)
	require.True(t, bytes.Equal(a, b), "same seed, same bytes")
	cfg.Seed = 8
	require.False(t, bytes.Equal(a, render(cfg, FormatPrometheus)), "another seed, other data")
}

// Both formats parse with Prometheus' own parsers, with the timestamps and
// sample counts expected.
func TestGenFormatsParse(t *testing.T) {
	cfg := testConfig(1)
	cfg.Start = cfg.End.Add(-5 * time.Minute)
	for _, tc := range []struct {
		f      Format
		ct     string
		suffix string
		unit   int64
	}{
		{FormatPrometheus, "text/plain", "", 1},
		{FormatOpenMetrics, "application/openmetrics-text", "# EOF\n", 1},
	} {
		body := append([]byte(TypeLines), render(cfg, tc.f)...)
		if tc.f == FormatOpenMetrics {
			body = append(render(cfg, tc.f), tc.suffix...) // promtool gets no TYPE lines
		}
		p, err := textparse.New(body, tc.ct, labels.NewSymbolTable(), textparse.ParserOptions{})
		require.NoError(t, err)
		n := 0
		var minT, maxT int64 = 1 << 62, 0
		for {
			et, err := p.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			if et != textparse.EntrySeries {
				continue
			}
			_, ts, _ := p.Series()
			require.NotNil(t, ts)
			minT, maxT = min(minT, *ts), max(maxT, *ts)
			n++
		}
		require.Equal(t, 20*4*SeriesPerGroup, n)
		require.Equal(t, cfg.Start.Add(15*time.Second).UnixMilli(), minT)
		require.Equal(t, cfg.End.UnixMilli(), maxT)
	}
}
