package dashboard

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExplainSpec: the breakdown and signals of engines.yaml resolve to
// the stored names; a phase storage lacks is named in Missing; Triton's
// microsecond counters are divided by its requests.
func TestExplainSpec(t *testing.T) {
	c, err := NewCatalog()
	require.NoError(t, err)
	require.Empty(t, c.checkBreakdowns())

	inv := &Inventory{Names: map[string]bool{
		"vllm:e2e_request_latency_seconds_bucket": true, "vllm:request_queue_time_seconds_bucket": true,
		"vllm:request_decode_time_seconds_bucket": true, "vllm:num_requests_waiting": true,
		"vllm:kv_cache_usage_perc": true, "DCGM_FI_DEV_GPU_UTIL": true, "probe_duration_seconds": true,
	}}
	s := &Service{Job: "vllm", Model: "m", Engine: "vllm", Instances: []string{"a:1", "b:2"}, Probes: []string{"p"},
		Selector: `job="vllm",model_name="m"`}
	spec := c.ExplainSpec(inv, s, "a:1")
	require.Equal(t, "vllm/m @ a:1", spec.Service)
	require.NotNil(t, spec.Total)
	require.Equal(t, `sum(rate(vllm:e2e_request_latency_seconds_sum{job="vllm",model_name="m",instance="a:1"}[$__window])) / sum(rate(vllm:e2e_request_latency_seconds_count{job="vllm",model_name="m",instance="a:1"}[$__window]))`, spec.Total.Mean)
	require.Equal(t, `histogram_quantile(0.95, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket{job="vllm",model_name="m",instance="a:1"}[$__window])))`, spec.Total.P95)
	var names []string
	for _, ph := range spec.Phases {
		names = append(names, ph.Name)
	}
	require.Equal(t, []string{"queue", "decode"}, names)
	require.Equal(t, []string{"vllm:request_prefill_time_seconds (prefill)"}, spec.Missing)
	require.Equal(t, `avg(avg_over_time(probe_duration_seconds{probe=~"p"}[$__window]))`, spec.Probe)
	var ids []string
	for _, sg := range spec.Signals {
		ids = append(ids, sg.ID)
	}
	require.Equal(t, []string{"waiting", "kv_cache", "gpu_util"}, ids)
	require.Equal(t, `sum({{waiting}}{$sel})`[0:4], spec.Signals[0].Chart[0:4])
	require.Contains(t, spec.Signals[0].Chart, `vllm:num_requests_waiting{job="vllm",model_name="m",instance="a:1"}`)

	inv = &Inventory{Names: map[string]bool{"nv_inference_request_duration_us": true, "nv_inference_queue_duration_us": true,
		"nv_inference_request_success": true}}
	s = &Service{Job: "triton", Model: "llama", Engine: "triton", Selector: `job="triton",model="llama"`}
	spec = c.ExplainSpec(inv, s, "")
	require.Equal(t, `sum(rate(nv_inference_queue_duration_us{job="triton",model="llama"}[$__window])) / sum(rate(nv_inference_request_success{job="triton",model="llama"}[$__window])) * 1e-06`, spec.Phases[0].Mean)
	require.Empty(t, spec.Phases[0].P95)
	require.Len(t, spec.Missing, 3, "compute input, infer and output")
}
