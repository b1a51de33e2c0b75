package ui

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
)

// BenchmarkImportHistory imports a backfill the way bench/tiers does:
// 96 series (histogram buckets and gauges) every 15 s, in time order,
// each iteration the next 2 hours of a range older than the raw retention
// (so the samples merge into the rollup tiers at Commit) or inside it.
func BenchmarkImportHistory(b *testing.B) {
	for _, c := range []struct {
		name string
		age  time.Duration
	}{{"old", 20 * 24 * time.Hour}, {"raw", 3 * 24 * time.Hour}} {
		b.Run(c.name, func(b *testing.B) {
			ts := newTestServer(b, nil)
			start := time.Now().Add(-c.age).Truncate(time.Hour)
			const step, window = 15 * time.Second, 2 * time.Hour
			var body bytes.Buffer
			samples := 0
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				body.Reset()
				samples += historyBody(&body, start.Add(time.Duration(i)*window), window, step)
				req := httptest.NewRequest(http.MethodPost, "/api/v1/import/prometheus", bytes.NewReader(body.Bytes()))
				req.Header.Set("Content-Type", "text/plain")
				rec := httptest.NewRecorder()
				b.StartTimer()
				ts.h.ServeHTTP(rec, req)
				require.Equal(b, http.StatusNoContent, rec.Code, rec.Body.String())
			}
			b.ReportMetric(float64(samples)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}

// historyBody writes window of 96 series at step from start, one step of
// every series after the other, and returns the number of samples.
func historyBody(w *bytes.Buffer, start time.Time, window, step time.Duration) int {
	les := []string{"0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf"}
	n := 0
	for t := start; t.Before(start.Add(window)); t = t.Add(step) {
		ms := strconv.FormatInt(t.UnixMilli(), 10)
		k := t.Unix() / int64(step/time.Second)
		for inst := range 6 {
			for j, le := range les {
				fmt.Fprintf(w, "bench:latency_seconds_bucket{instance=\"10.0.0.%d:8000\",job=\"vllm\",model_name=\"m\",le=%q} %d %s\n", inst, le, k*int64(j+1), ms)
				fmt.Fprintf(w, "bench:queue_depth{instance=\"10.0.0.%d:8000\",job=\"vllm\",model_name=\"m\",slot=\"%d\"} %d %s\n", inst, j, (k*7+int64(j))%13, ms)
				n += 2
			}
		}
	}
	return n
}

// BenchmarkImportParse parses one batch of a backfill whose series the
// body named before: through the text parser, and through parseKnown.
func BenchmarkImportParse(b *testing.B) {
	var body bytes.Buffer
	historyBody(&body, time.UnixMilli(1_764_590_400_000), 2*time.Hour, 15*time.Second)
	batch := body.Bytes()
	for _, known := range []bool{false, true} {
		b.Run(fmt.Sprintf("known=%v", known), func(b *testing.B) {
			c := newImportSeriesCache(labels.EmptyLabels())
			_, _, err := c.parse(batch, "text/plain", 0)
			require.NoError(b, err)
			b.SetBytes(int64(len(batch)))
			for b.Loop() {
				if known {
					_, ok := c.parseKnown(batch, 0)
					require.True(b, ok)
				} else {
					_, _, err = c.parseText(batch, "text/plain", "text/plain", 0)
					require.NoError(b, err)
				}
			}
		})
	}
}
