package ui

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/golang/snappy"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"
)

// fixtureBodies returns the exposition fixtures in ../testdata (copies of
// the shared fixtures of real exporters), file name -> body, each cut to
// its first whole lines within 4 KiB (an OpenMetrics one keeps its # EOF):
// every family shape is near the top, and small seeds keep the fuzzer
// fast.
func fixtureBodies(f *testing.F) map[string][]byte {
	f.Helper()
	const maxSeed = 4 << 10
	paths, err := filepath.Glob("../testdata/*")
	require.NoError(f, err)
	require.NotEmpty(f, paths)
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(f, err)
		if len(b) > maxSeed {
			b = b[:bytes.LastIndexByte(b[:maxSeed], '\n')+1]
			if strings.Contains(p, "openmetrics") {
				b = append(b, "# EOF\n"...)
			}
		}
		out[filepath.Base(p)] = b
	}
	return out
}

func contentTypeOf(name string) string {
	if strings.Contains(name, "openmetrics") {
		return "application/openmetrics-text; version=1.0.0"
	}
	return "text/plain; version=0.0.4"
}

// FuzzImportParser feeds the text importer's parser arbitrary bodies.
// Invariants: no panic; an accepted body's samples all have a metric name
// and the extra label; and an accepted body whose names are all classic
// (legacy) names round-trips: printed back as text with timestamps and
// parsed again, it gives the same samples.
func FuzzImportParser(f *testing.F) {
	for name, b := range fixtureBodies(f) {
		f.Add(b, contentTypeOf(name))
	}
	f.Add([]byte("a 1\nb{x=\"1\"} 2 1700000000000\n"), "text/plain")
	f.Add([]byte("import_probe_ok 1\nimport_probe_bad{x=\"1\" 2\n"), "text/plain")
	f.Add([]byte("# TYPE x counter\nx_total 1\n# EOF\n"), "application/openmetrics-text")

	const now = 1_764_590_400_000
	extra := labels.FromStrings("site", "lab1")
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		samples, _, err := parseImport(body, contentType, extra, now)
		// A later batch of the same body knows its series (parseKnown's
		// fast path): it must read the same samples, or fail the same.
		known := newImportSeriesCache(extra)
		_, _, _ = known.parse(body, contentType, now)
		second, _, err2 := known.parse(body, contentType, now)
		require.Equal(t, err == nil, err2 == nil, "second parse: %v, first: %v", err2, err)
		if err != nil {
			require.Nil(t, samples)
			return
		}
		requireSameSamples(t, samples, second)
		roundTrip := true
		var text bytes.Buffer
		for _, s := range samples {
			name := s.lset.Get(model.MetricNameLabel)
			require.NotEmpty(t, name, "sample without a metric name: %s", s.lset)
			require.Equal(t, "lab1", s.lset.Get("site"), "extra label missing: %s", s.lset)
			if !model.LegacyValidation.IsValidMetricName(name) {
				roundTrip = false
			}
			text.WriteString(name)
			text.WriteByte('{')
			first := true
			s.lset.Range(func(l labels.Label) {
				if l.Name == model.MetricNameLabel {
					return
				}
				if !model.LegacyValidation.IsValidLabelName(l.Name) {
					roundTrip = false
				}
				if !first {
					text.WriteByte(',')
				}
				first = false
				fmt.Fprintf(&text, "%s=\"%s\"", l.Name, labelEscaper.Replace(l.Value))
			})
			fmt.Fprintf(&text, "} %s %d\n", formatValue(s.v), s.t)
		}
		if !roundTrip || !strings.HasPrefix(contentType, "text/plain") && contentType != "" {
			return
		}
		again, _, err := parseImport(text.Bytes(), "text/plain", labels.EmptyLabels(), now)
		require.NoError(t, err, "printed back:\n%s", text.String())
		require.Len(t, again, len(samples))
		for i := range samples {
			require.Equal(t, samples[i].lset.String(), again[i].lset.String())
			require.Equal(t, samples[i].t, again[i].t)
			if math.IsNaN(samples[i].v) {
				require.True(t, math.IsNaN(again[i].v))
			} else {
				require.Equal(t, samples[i].v, again[i].v)
			}
		}
	})
}

func requireSameSamples(t *testing.T, want, got []importSample) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, want[i].lset.String(), got[i].lset.String())
		require.Equal(t, want[i].t, got[i].t)
		require.Equal(t, math.Float64bits(want[i].v), math.Float64bits(got[i].v), "value of sample %d: %v, %v", i, want[i].v, got[i].v)
	}
}

// labelEscaper escapes a label value as the text format does.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func formatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// FuzzRemoteWrite posts arbitrary bodies to /api/v1/write as remote write
// 1.0 (snappy-compressed protobuf). Invariants: no panic; the answer is
// 204 or 400, never a 5xx; a body that is not snappy, or not a
// WriteRequest inside, is a 400.
func FuzzRemoteWrite(f *testing.F) {
	for name, b := range fixtureBodies(f) {
		samples, _, err := parseImport(b, contentTypeOf(name), labels.EmptyLabels(), 1_764_590_400_000)
		require.NoError(f, err, name)
		req := &prompb.WriteRequest{}
		for i, s := range samples {
			if i == 20 { // a few series each is enough to start from
				break
			}
			ts := prompb.TimeSeries{Samples: []prompb.Sample{{Timestamp: s.t, Value: s.v}}}
			s.lset.Range(func(l labels.Label) { ts.Labels = append(ts.Labels, prompb.Label{Name: l.Name, Value: l.Value}) })
			req.Timeseries = append(req.Timeseries, ts)
		}
		raw, err := req.Marshal()
		require.NoError(f, err)
		f.Add(snappy.Encode(nil, raw))
	}
	f.Add([]byte("definitely not snappy"))
	f.Add(snappy.Encode(nil, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}))
	f.Add(snappy.Encode(nil, nil))

	ts := newTestServer(f, nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/write", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("Content-Encoding", "snappy")
		req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
		rec := httptest.NewRecorder()
		ts.h.ServeHTTP(rec, req)
		require.Contains(t, []int{http.StatusNoContent, http.StatusBadRequest}, rec.Code, "answer %d: %s", rec.Code, rec.Body.String())

		raw, err := snappy.Decode(nil, body)
		if err == nil {
			err = (&prompb.WriteRequest{}).Unmarshal(raw)
		}
		if err != nil {
			require.Equal(t, http.StatusBadRequest, rec.Code, "an undecodable body was accepted")
		}
	})
}
