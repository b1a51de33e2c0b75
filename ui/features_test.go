package ui

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFeaturesAndBuildInfo(t *testing.T) {
	ts := newTestServer(t, func(o *Options) { o.ApplianceVersion = "1.2.3" })

	code, body := ts.get("/api/v1/features")
	require.Equal(t, http.StatusOK, code, body)
	var feats map[string]map[string]bool
	require.NoError(t, json.Unmarshal(decode(t, body).Data, &feats))
	require.True(t, feats["promql_functions"]["rate"])
	require.True(t, feats["promql_functions"]["histogram_quantile"])
	require.True(t, feats["promql_operators"][">="], "operators unescaped, as Prometheus writes them")
	require.True(t, feats["api"]["remote_write_receiver"])
	require.False(t, feats["api"]["admin"])
	require.True(t, feats["rules"]["keep_firing_for"])
	require.True(t, feats["prometheus"]["server_mode"])

	code, body = ts.get("/api/v1/status/buildinfo")
	require.Equal(t, http.StatusOK, code)
	var bi map[string]string
	require.NoError(t, json.Unmarshal(decode(t, body).Data, &bi))
	require.Equal(t, "9.9.9-test", bi["version"])
	require.Equal(t, "1.2.3", bi["applianceVersion"])
	require.Contains(t, bi, "revision")

	ts.srv.SetReady(false)
	code, _ = ts.get("/api/v1/status/buildinfo")
	require.Equal(t, http.StatusServiceUnavailable, code, "as Prometheus' API before it is ready")
}
