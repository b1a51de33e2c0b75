package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

func TestProbesCollectorsAutodetectGood(t *testing.T) {
	cfg, err := LoadFile("testdata/probes/good.yml")
	require.NoError(t, err)
	require.Len(t, cfg.Probes, 2)

	chat := cfg.Probes[0]
	require.Equal(t, ProbeKindLLM, chat.Kind)
	require.Equal(t, DefaultProbeInterval, chat.Interval)
	require.Equal(t, DefaultLLMProbeTimeout, chat.Timeout)
	require.Equal(t, DefaultLLMProbePrompt, chat.Prompt)
	require.Equal(t, 16, chat.MaxTokens)
	require.Equal(t, "/v1/chat/completions", chat.APIPath(nil))
	require.Equal(t, "Bearer sk-123", string(chat.Headers["Authorization"]))

	health := cfg.Probes[1]
	require.Equal(t, "GET", health.Method)
	require.Equal(t, model.Duration(10*time.Second), health.Timeout)
	require.Equal(t, []int{200, 204}, health.ExpectStatus)
	require.Equal(t, "ca.pem", filepath.Base(health.TLSConfig.CAFile))
	// Relative TLS files resolve against the file's directory once
	// Config.setDirectory calls ProbeConfig.SetDirectory.
	h := &ProbeConfig{TLSConfig: commoncfg.TLSConfig{CAFile: "ca.pem"}}
	h.SetDirectory("testdata/probes")
	require.Equal(t, filepath.Join("testdata/probes", "ca.pem"), h.TLSConfig.CAFile)
	(*ProbeConfig)(nil).SetDirectory("x")

	require.Equal(t, CollectorsConfig{Enabled: true, Host: true, Thermal: true, GPU: false,
		NvidiaSMI: "/opt/nvidia/bin/nvidia-smi", Vcgencmd: "vcgencmd", ProcPath: "/proc", SysPath: "/sys", RootFSPath: "/"}, cfg.Collectors)
	require.True(t, cfg.Autodetect.Enabled)
	require.Equal(t, []int{8000, 11434}, cfg.Autodetect.Ports)
	require.Equal(t, "localhost", cfg.Autodetect.Host)

	// Secrets in headers never reach the status page.
	require.NotContains(t, cfg.String(), "sk-123")
}

func TestProbesSectionsDefaultOn(t *testing.T) {
	cfg, err := Load([]byte("scrape_configs: []\n"), "")
	require.NoError(t, err)
	require.Equal(t, DefaultCollectorsConfig, cfg.Collectors)
	require.Equal(t, DefaultAutodetectConfig, cfg.Autodetect)
	require.True(t, Default("").Autodetect.Enabled)
	require.True(t, Default("").Collectors.Enabled)
}

func TestProbesBadFiles(t *testing.T) {
	f := func(name, want string) {
		t.Helper()
		_, err := LoadFile(filepath.Join("testdata/probes", name))
		require.Error(t, err, name)
		require.Equal(t, want, err.Error())
	}
	f("kind.bad.yml", `testdata/probes/kind.bad.yml:4: probe chat: unknown kind "grpc"; want http or llm`)
	f("llm-url.bad.yml", `testdata/probes/llm-url.bad.yml:7: probe chat: url "http://localhost:8000/v1/embeddings" must end in one of /v1/chat/completions, /v1/completions, /api/generate, /api/chat for kind llm`)
	f("timeout.bad.yml", `testdata/probes/timeout.bad.yml:6: probe slow: timeout "10s" is longer than the interval 5s; one probe never runs twice at once`)
	f("unknown-key.bad.yml", `testdata/probes/unknown-key.bad.yml:5: unknown field "max_token"`)
	f("autodetect-port.bad.yml", `testdata/probes/autodetect-port.bad.yml:3: autodetect port 70000 is not a TCP port (1-65535)`)
	f("collectors.bad.yml", `testdata/probes/collectors.bad.yml:3: unknown field "gpus"`)
}

// TestProbesDuplicateNames: checkProbes, which the loader calls for the
// probes section, points at the second name.
func TestProbesDuplicateNames(t *testing.T) {
	data, err := os.ReadFile("testdata/probes/duplicate.bad.yml")
	require.NoError(t, err)
	root, err := parseDocument(data)
	require.NoError(t, err)
	_, n := mappingKey(root, "probes")
	var probes []*ProbeConfig
	require.Empty(t, decodeV2(n, &probes))
	require.ErrorIs(t, ValidateProbes(probes), ErrDuplicateProbe)

	l := &loader{file: "duplicate.bad.yml"}
	l.checkProbes(n, probes)
	require.Len(t, l.errs, 1)
	require.Equal(t, `duplicate.bad.yml:5: probe name "chat" is used twice (first at line 2); every probe needs its own name`, l.errs[0].Error())
}
