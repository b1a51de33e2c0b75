package probe

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/config"
)

// TestManagerConfigs: Configs lists configured and detected probes, the
// configured one winning a name both have, before Run too.
func TestManagerConfigs(t *testing.T) {
	opts := DefaultOptions()
	opts.Appendable = newRecorder()
	m, err := NewManager(opts)
	require.NoError(t, err)
	cfg, err := config.Load([]byte("probes:\n  - {name: vllm-8000, kind: http, url: \"http://127.0.0.1:8000/health\"}\n"), "")
	require.NoError(t, err)
	require.NoError(t, m.ApplyConfig(cfg.Probes))
	m.SetDetected([]*config.ProbeConfig{
		{Name: "vllm-8000", Kind: config.ProbeKindLLM, URL: "http://127.0.0.1:8000/v1/completions"},
		{Name: "tgi-3000", Kind: config.ProbeKindLLM, URL: "http://127.0.0.1:3000/v1/completions"},
	})
	got := m.Configs()
	require.Len(t, got, 2)
	require.Equal(t, "tgi-3000", got[0].Name)
	require.Equal(t, "vllm-8000", got[1].Name)
	require.Equal(t, "http://127.0.0.1:8000/health", got[1].URL, "the configured probe wins")
}
