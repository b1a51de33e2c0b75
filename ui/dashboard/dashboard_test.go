package dashboard

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVLLMVersionsFillTTFTAndTPOT: the 0.11 and 0.12 fixtures both fill
// the TTFT and TPOT panels, each with its own version's TPOT name (the
// fixture test runs the queries).
func TestVLLMVersionsFillTTFTAndTPOT(t *testing.T) {
	cat, err := NewCatalog()
	require.NoError(t, err)
	for _, c := range []struct{ file, tpot string }{
		{"vllm.prom", "vllm:time_per_output_token_seconds_bucket"},
		{"vllm-qwen-0.12.prom", "vllm:request_time_per_output_token_seconds_bucket"},
	} {
		t.Run(c.file, func(t *testing.T) {
			s := openStore(t)
			s.loadFixture(t, fixture(c.file), "vllm", "127.0.0.1:8000")
			inv, err := cat.Discover(context.Background(), s.db, s.start.UnixMilli(), s.end.UnixMilli(), nil)
			require.NoError(t, err)
			exprs := map[string][]string{}
			for _, def := range cat.Embedded() {
				d := cat.Resolve(def, inv, Filter{})
				for _, r := range d.Rows {
					for _, p := range r.Panels {
						for _, q := range p.Queries {
							exprs[d.ID+"/"+p.ID] = append(exprs[d.ID+"/"+p.ID], q.Expr)
						}
					}
				}
			}
			require.Contains(t, strings.Join(exprs["model/ttft"], "\n"), "vllm:time_to_first_token_seconds_bucket")
			require.Contains(t, strings.Join(exprs["model/tpot"], "\n"), c.tpot)
			require.Contains(t, strings.Join(exprs["model/tpot_heatmap"], "\n"), c.tpot)
			ov := strings.Join(exprs["overview/ttft_tpot_p95"], "\n")
			require.Contains(t, ov, "vllm:time_to_first_token_seconds_bucket")
			require.Contains(t, ov, c.tpot)
		})
	}
}

// TestUserDashboards: a user directory adds dashboards (YAML or JSON);
// each bad file is an error naming it, and the others still load.
func TestUserDashboards(t *testing.T) {
	cat, err := NewCatalog()
	require.NoError(t, err)
	dir := t.TempDir()
	write := func(name, body string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	write("a.json", `{"id": "gpus", "title": "GPUs", "rows": [{"id": "r", "title": "R", "panels": [
		{"id": "t", "title": "Temp", "kind": "timeseries", "unit": "celsius", "queries": [{"expr": "max({{gpu.temp}})", "legend": "max"}]}]}]}`)
	write("b.yaml", "id: b\ntitle: B\nrows: [\n")                                                                                                           // not YAML
	write("c.yaml", "id: c\ntitle: C\ncolour: red\nrows: []\n")                                                                                             // unknown key
	write("d.yaml", "id: d\ntitle: D\nrows: [{id: r, title: R, panels: [{id: p, title: P, kind: timeseries, unit: s, queries: [{expr: 'x{{nope}}'}]}]}]\n") // key not in engines.yaml
	write("e.yaml", "id: overview\ntitle: Mine\nrows: [{id: r, title: R, panels: [{id: p, title: P, kind: stat, unit: s, queries: [{expr: 'up'}]}]}]\n")    // id taken
	write("f.yaml", "id: f\ntitle: F\nrows: [{id: r, title: R, panels: [{id: p, title: P, kind: pie, unit: s, queries: [{expr: 'up'}]}]}]\n")               // bad kind
	write("notes.txt", "ignored")

	defs, errs := cat.WithDir(dir)
	var ids []string
	for _, d := range defs {
		ids = append(ids, d.ID+"="+d.Source)
	}
	require.Equal(t, []string{"overview=embedded", "model=embedded", "probes=embedded", "hardware=embedded", "gpus=" + filepath.Join(dir, "a.json")}, ids)
	require.Len(t, errs, 5)
	for i, name := range []string{"b.yaml", "c.yaml", "d.yaml", "e.yaml", "f.yaml"} {
		require.Contains(t, errs[i].Error(), filepath.Join(dir, name))
	}
	require.Contains(t, errs[1].Error(), "colour")
	require.Contains(t, errs[2].Error(), "{{nope}}")
	require.Contains(t, errs[3].Error(), `"overview" is already taken`)
	require.Contains(t, errs[4].Error(), `kind "pie"`)

	_, errs = cat.WithDir(filepath.Join(dir, "missing"))
	require.Len(t, errs, 1)
	require.Contains(t, errs[0].Error(), "ui.dashboards_dir")
}

// TestEmbeddedKeysDefined: every key of the embedded dashboards is in
// engines.yaml (NewCatalog checks), and every by_engine list names a
// model-server engine.
func TestEmbeddedKeysDefined(t *testing.T) {
	cat, err := NewCatalog()
	require.NoError(t, err)
	require.Len(t, cat.Embedded(), 4)
	require.Equal(t, []string{"vllm", "sglang", "tgi", "triton", "fastapi", "ollama", "generic", "probe", "gpu", "host", "appliance"}, cat.Engines.Order)
}

// TestProbeMatching: a probe belongs to a service when its URL's host and
// port are one of the service's instances (localhost and 127.0.0.1 alike)
// and, when both name a model, the models agree.
func TestProbeMatching(t *testing.T) {
	s := &Service{Job: "vllm", Model: "llama", Instances: []string{"127.0.0.1:8000", "gpu-box:443"}}
	for _, c := range []struct {
		p    ProbeTarget
		want bool
	}{
		{ProbeTarget{URL: "http://127.0.0.1:8000/v1/chat/completions", Model: "llama"}, true},
		{ProbeTarget{URL: "http://localhost:8000/v1/completions"}, true},
		{ProbeTarget{URL: "http://127.0.0.1:8000/v1/chat/completions", Model: "qwen"}, false},
		{ProbeTarget{URL: "http://127.0.0.1:8001/v1/chat/completions"}, false},
		{ProbeTarget{URL: "https://GPU-BOX/health"}, true},
		{ProbeTarget{URL: "http://gpu-box/health"}, false},
		{ProbeTarget{URL: "::not a url"}, false},
	} {
		require.Equal(t, c.want, s.matches(c.p), "%+v", c.p)
	}
	// Auto-detection's probes, named <job>-<port>, match without a target.
	require.True(t, s.autodetected("vllm-8000"))
	require.False(t, s.autodetected("vllm-8001"))
	require.False(t, s.autodetected("tgi-8000"))
}

// TestResolveFilters: the overview keeps the services the page names, the
// model page shows the one it names, and $probes narrows the probes page.
func TestResolveFilters(t *testing.T) {
	cat, err := NewCatalog()
	require.NoError(t, err)
	inv := &Inventory{
		Names: map[string]bool{"vllm:num_requests_waiting": true, "up": true, "probe_success": true, "vllm:e2e_request_latency_seconds_bucket": true},
		Services: []*Service{
			{Job: "vllm", Model: "a", Engine: "vllm", ModelLabel: "model_name", Instances: []string{"h:1"}, Probes: []string{"pa"}, Selector: `job="vllm",model_name="a"`},
			{Job: "vllm", Model: "b", Engine: "vllm", ModelLabel: "model_name", Instances: []string{"h:1"}, Probes: []string{}, Selector: `job="vllm",model_name="b"`},
		},
	}
	def := func(id string) *Definition {
		for _, d := range cat.Embedded() {
			if d.ID == id {
				return d
			}
		}
		t.Fatalf("no dashboard %s", id)
		return nil
	}
	ov := cat.Resolve(def("overview"), inv, Filter{})
	require.Len(t, ov.Rows, 2)
	require.Equal(t, "vllm:a", ov.Rows[0].ID)
	require.Equal(t, "probe_availability", ov.Rows[0].Panels[0].ID, "the probe comes first")
	require.NotEqual(t, "probe_availability", ov.Rows[1].Panels[0].ID, "b has no probe")
	ov = cat.Resolve(def("overview"), inv, Filter{Job: "vllm", Model: "b"})
	require.Len(t, ov.Rows, 1)
	require.Equal(t, "b", ov.Rows[0].Service.Model)

	m := cat.Resolve(def("model"), inv, Filter{Job: "vllm", Model: "b"})
	require.Equal(t, "b", m.Service.Model)
	m = cat.Resolve(def("model"), inv, Filter{})
	require.Equal(t, "a", m.Service.Model, "the first service without a filter")

	pr := cat.Resolve(def("probes"), inv, Filter{})
	require.Contains(t, pr.Rows[0].Panels[0].Queries[0].Expr, "probe_success{}")
	pr = cat.Resolve(def("probes"), inv, Filter{Job: "vllm", Model: "a"})
	require.Contains(t, pr.Rows[0].Panels[0].Queries[0].Expr, `probe_success{probe=~"pa"}`)
	pr = cat.Resolve(def("probes"), inv, Filter{Job: "vllm", Model: "b"})
	require.Empty(t, pr.Rows, "a service without probes has no probe panels")
}

// TestOllamaService: Ollama has no metrics; its probe makes its service,
// whose overview row has the probe's panels.
func TestOllamaService(t *testing.T) {
	cat, err := NewCatalog()
	require.NoError(t, err)
	s := openStore(t)
	s.loadProbe(t, "ollama-11434")
	inv, err := cat.Discover(context.Background(), s.db, s.start.UnixMilli(), s.end.UnixMilli(), []ProbeTarget{
		{Name: "ollama-11434", URL: "http://localhost:11434/api/version"},
		{Name: "remote", URL: "https://api.example.com/v1/chat/completions"},
	})
	require.NoError(t, err)
	require.Len(t, inv.Services, 1)
	require.Equal(t, Service{Job: "ollama", Engine: "ollama", Instances: []string{"localhost:11434"}, Probes: []string{"ollama-11434"}}, *inv.Services[0])
	for _, def := range cat.Embedded() {
		if def.ID != "overview" {
			continue
		}
		d := cat.Resolve(def, inv, Filter{})
		require.Equal(t, []string{"ollama/probe_availability", "ollama/probe_latency", "ollama/alerts_firing"}, shown(d))
	}
}
