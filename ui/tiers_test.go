package ui_test

// The HTTP side of the tiers (Options.Tiers: max_source_resolution, the
// tiers used, /api/v1/status/tiers) over
// a real storage and downsampler.

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/aiserve/appliance/downsample"
	"github.com/aiserve/appliance/query"
	"github.com/aiserve/appliance/scrape"
	"github.com/aiserve/appliance/storage"
	"github.com/aiserve/appliance/ui"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"
)

func TestTiersOverHTTP(t *testing.T) {
	opts := storage.DefaultOptions()
	opts.Path = t.TempDir()
	db, err := storage.Open(opts)
	require.NoError(t, err)
	defer db.Close()
	end := time.Now().Add(-time.Hour).Truncate(time.Hour)
	start := end.Add(-3 * time.Hour)
	app := db.AppenderV2(context.Background())
	for ts := start; !ts.After(end); ts = ts.Add(15 * time.Second) {
		_, err := app.Append(0, labels.FromStrings("__name__", "queue", "job", "a"), 0, ts.UnixMilli(), float64(ts.Unix()%60), nil, nil, promstorage.AOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, app.Commit())
	db.Flush()
	ds, err := downsample.New(db, downsample.Options{Now: func() time.Time { return end.Add(2 * time.Minute) }})
	require.NoError(t, err)
	defer ds.Close()
	require.NoError(t, ds.Step(context.Background()))

	sc, err := scrape.New(scrape.Options{Appendable: db, Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	eng := query.New(query.Options{}, nil, nil)
	srv, err := ui.New(ui.Options{
		Storage:    db,
		Engine:     eng,
		Targets:    sc.Manager(),
		ConfigYAML: func() string { return "global: {}\n" },
		Gatherer:   prometheus.NewRegistry(),
		Tiers:      db,
	})
	require.NoError(t, err)
	srv.SetReady(true)
	h := srv.Handler()
	get := func(path string, hdr ...string) (int, http.Header, map[string]any) {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var body map[string]any
		if rec.Header().Get("Content-Encoding") == "" {
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
		}
		return rec.Code, rec.Header(), body
	}
	rangeQuery := func(extra string) string {
		return fmt.Sprintf("/api/v1/query_range?query=%s&start=%d&end=%d&step=600%s",
			url.QueryEscape("max_over_time(queue[10m])"), start.Add(time.Hour).Unix(), end.Unix(), extra)
	}

	// A 10m step prefers 1m (step/5), but max_over_time over whole 5m
	// windows reads the 5m tier, whose answer is the same (storage's
	// exactTier).
	code, hdr, body := get(rangeQuery(""))
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "5m", hdr.Get(ui.TiersHeader))
	require.Equal(t, []any{"5m"}, body["tiers"])
	require.Equal(t, "success", body["status"])

	code, hdr, body = get(rangeQuery("&max_source_resolution=raw"))
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "raw", hdr.Get(ui.TiersHeader))
	require.Equal(t, []any{"raw"}, body["tiers"])

	// Compressed answers carry them in the header and in the body.
	req := httptest.NewRequest(http.MethodGet, rangeQuery(""), nil)
	req.Header.Set("Accept-Encoding", "gzip")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "gzip", rec.Header().Get("Content-Encoding"))
	require.Equal(t, "5m", rec.Header().Get(ui.TiersHeader))
	zr, err := gzip.NewReader(rec.Body)
	require.NoError(t, err)
	body = nil
	require.NoError(t, json.NewDecoder(zr).Decode(&body))
	require.Equal(t, []any{"5m"}, body["tiers"])

	code, _, body = get(rangeQuery("&max_source_resolution=2m"))
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "bad_data", body["errorType"])

	code, _, body = get("/api/v1/status/tiers")
	require.Equal(t, http.StatusOK, code, body)
	tiers := body["data"].([]any)
	require.Len(t, tiers, 3)
	raw, oneMin := tiers[0].(map[string]any), tiers[1].(map[string]any)
	require.Equal(t, "raw", raw["tier"])
	require.EqualValues(t, 1, raw["series"])
	require.EqualValues(t, 3*240+1, raw["samples"])
	require.Equal(t, "1m", oneMin["tier"])
	require.EqualValues(t, 4, oneMin["series"]) // max, negmin, sum, count
	require.NotNil(t, oneMin["watermark"])
	require.NotNil(t, oneMin["lagSeconds"])
}
