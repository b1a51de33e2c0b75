package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPipelinesGood(t *testing.T) {
	cfg, err := Load([]byte(`
pipelines:
  - name: camera-to-cloud
    segments:
      - name: upload
        histogram: edge_upload_seconds
        selector: '{device=~"cam.*"}'
        transfer: {bytes: edge_upload_bytes_total, retries: edge_upload_retries_total, failures: edge_upload_failures_total}
      - name: inference
        duration: edge_inference_seconds
`), "")
	require.NoError(t, err)
	require.Len(t, cfg.Pipelines, 1)
	p := cfg.Pipelines[0]
	require.Equal(t, "camera-to-cloud", p.Name)
	require.Len(t, p.Segments, 2)
	require.Equal(t, "edge_upload_seconds", p.Segments[0].Metric())
	require.Equal(t, `device=~"cam.*"`, p.Segments[0].Matchers())
	require.Equal(t, "edge_upload_failures_total", p.Segments[0].Transfer.Failures)
	require.Equal(t, "edge_inference_seconds", p.Segments[1].Metric())
	require.Equal(t, "", p.Segments[1].Matchers())
	require.Nil(t, p.Segments[1].Transfer)
}
