package demo

import (
	"testing"
	"time"

	"github.com/aiserve/appliance/clock"
)

func benchInstance(b *testing.B, models []string) (*Instance, *clock.Fake) {
	b.Helper()
	clock := newFakeClock()
	f, err := NewFleet(FleetOptions{Instances: 1, Models: models, Seed: 1, Now: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	in := f.Instance(0)
	clock.Advance(time.Hour)
	in.AppendMetrics(nil)
	return in, clock
}

// BenchmarkScrapeInstance is one /metrics scrape as the fleet serves it:
// advance the simulation by a 5 s scrape interval, then render the page.
func BenchmarkScrapeInstance(b *testing.B) {
	in, clock := benchInstance(b, DefaultModels)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		clock.Advance(5 * time.Second)
		buf = in.AppendMetrics(buf[:0])
	}
	b.SetBytes(int64(len(buf)))
	b.ReportMetric(float64(in.SeriesCount()), "series")
}

// BenchmarkRenderInstance renders without simulated time passing.
func BenchmarkRenderInstance(b *testing.B) {
	in, _ := benchInstance(b, DefaultModels)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = in.AppendMetrics(buf[:0])
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkAdvanceAfterIdle is a scrape after ten minutes without one: the
// per-advance work is capped (maxChunks, repsPerChunk).
func BenchmarkAdvanceAfterIdle(b *testing.B) {
	in, clock := benchInstance(b, DefaultModels)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		clock.Advance(10 * time.Minute)
		buf = in.AppendMetrics(buf[:0])
	}
}
