package ui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/cardinality"
	"github.com/aiserve/appliance/storage"
	"github.com/aiserve/appliance/storage/storagetest"
)

// newGuardedServer is newTestServer over a storage with storage.max_series
// and the cardinality report.
func newGuardedServer(t *testing.T, maxSeries int) *testServer {
	t.Helper()
	opts := storage.DefaultOptions()
	opts.MaxSeries = maxSeries
	db := storagetest.OpenOptions(t, opts)
	ts := newTestServer(t, func(o *Options) {
		o.Storage = db
		o.Cardinality = cardinality.New(cardinality.Options{Status: db, Queryable: db.Raw(), SeriesLimit: db.SeriesLimit, MaxLabelValues: 5})
		o.Registerer = prometheus.NewRegistry()
	})
	ts.db = db
	return ts
}

// TestIngestPastMaxSeries: an import and a remote write with new series
// past storage.max_series store the samples of the series already there,
// refuse the others with 400 naming the limit, and count them.
func TestIngestPastMaxSeries(t *testing.T) {
	ts := newGuardedServer(t, 3)
	now := time.Now().UnixMilli()
	var body strings.Builder
	for i := range 5 {
		fmt.Fprintf(&body, "reqs{request_id=\"%d\"} 1 %d\n", i, now)
	}
	code, resp := ts.post("/api/v1/import/prometheus", "text/plain", []byte(body.String()))
	require.Equal(t, http.StatusBadRequest, code, resp)
	require.Contains(t, resp, "2 sample(s) of new series refused")
	require.Contains(t, resp, "storage.max_series (3 active series) reached")
	require.Contains(t, resp, "other 3 samples were stored")
	require.Len(t, storagetest.Last(t, ts.db, `reqs`), 3)

	// Remote write: an existing series and a new one in one request.
	code, resp = ts.remoteWriteV1(&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: []prompb.Label{{Name: "__name__", Value: "reqs"}, {Name: "request_id", Value: "0"}}, Samples: []prompb.Sample{{Value: 7, Timestamp: now + 1000}}},
		{Labels: []prompb.Label{{Name: "__name__", Value: "reqs"}, {Name: "request_id", Value: "new"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: now + 1000}}},
	}})
	require.Equal(t, http.StatusBadRequest, code, resp)
	require.Contains(t, resp, "other samples were stored")
	require.Equal(t, 7.0, storagetest.Last(t, ts.db, `reqs{request_id="0"}`)[`{__name__="reqs", request_id="0"}`])
	require.Len(t, storagetest.Last(t, ts.db, `reqs`), 3)

	require.Equal(t, int64(3), int64(ts.db.SeriesLimit().Refusals[0].Samples))
}

func TestCardinalityAPI(t *testing.T) {
	ts := newGuardedServer(t, 0)
	now := time.Now().UnixMilli()
	var body strings.Builder
	for i := range 40 {
		fmt.Fprintf(&body, "reqs{job=\"edge\",instance=\"dev:1\",request_id=\"%08x-3b1d-4c8e-9a7f-0e5d6c4b3a21\"} 1 %d\n", i, now)
	}
	code, resp := ts.post("/api/v1/import/prometheus", "text/plain", []byte(body.String()))
	require.Equal(t, http.StatusNoContent, code, resp)
	ts.db.Flush()
	code, resp = ts.get("/api/v1/appliance/cardinality")
	require.Equal(t, http.StatusOK, code, resp)
	var r struct {
		Status string             `json:"status"`
		Data   cardinality.Report `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(resp), &r))
	require.EqualValues(t, 40, r.Data.TotalSeries)
	require.Len(t, r.Data.Flagged, 1)
	f := r.Data.Flagged[0]
	require.Equal(t, []string{"reqs", "request_id", "edge", "dev:1", "id_like"}, []string{f.Metric, f.Label, f.Job, f.Instance, f.Reason})
	require.Equal(t, 40, f.Values)
}

func TestPatchTargetsLastError(t *testing.T) {
	last := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	body := []byte(`{"status":"success","data":{"activeTargets":[` +
		`{"labels":{"job":"a","instance":"h:1"},"lastScrape":"2026-01-01T10:00:00Z","lastError":"","health":"up"},` +
		`{"labels":{"job":"b","instance":"h:2"},"lastScrape":"2026-01-01T10:00:00Z","lastError":"","health":"up"}],"droppedTargets":[]}}`)
	lim := storage.SeriesLimit{Limit: 10, Refusals: []storage.SeriesRefusal{
		{TargetKey: storage.TargetKey{Job: "a", Instance: "h:1"}, Samples: 4, Last: last.Add(time.Second), Example: `x{id="1"}`},
		// b's refusal is older than its last scrape: that scrape was fine.
		{TargetKey: storage.TargetKey{Job: "b", Instance: "h:2"}, Samples: 1, Last: last.Add(-time.Minute), Example: `y`},
	}}
	out, err := patchTargets(body, lim)
	require.NoError(t, err)
	var resp struct {
		Data struct {
			ActiveTargets []struct {
				LastError string `json:"lastError"`
				Health    string `json:"health"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(out, &resp))
	require.Contains(t, resp.Data.ActiveTargets[0].LastError, "storage.max_series (10 active series) reached")
	require.Contains(t, resp.Data.ActiveTargets[0].LastError, `x{id="1"}`)
	require.Equal(t, "up", resp.Data.ActiveTargets[0].Health)
	require.Empty(t, resp.Data.ActiveTargets[1].LastError)
}
