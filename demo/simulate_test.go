package demo

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	dto "github.com/prometheus/client_model/go"

	"github.com/aiserve/appliance/clock"
)

// checkInvariants asserts what holds within one page: cumulative buckets,
// +Inf equal to _count, no negative counter.
func checkInvariants(t *testing.T, mfs map[string]*dto.MetricFamily) {
	t.Helper()
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetType() {
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				prev := uint64(0)
				for _, b := range h.GetBucket() {
					require.GreaterOrEqual(t, b.GetCumulativeCount(), prev, "%s: buckets not cumulative", name)
					prev = b.GetCumulativeCount()
				}
				// The parser folds +Inf into the sample count; the last finite
				// bucket must not exceed it.
				require.LessOrEqual(t, prev, h.GetSampleCount(), name)
				require.GreaterOrEqual(t, h.GetSampleSum(), 0.0, name)
			case dto.MetricType_COUNTER:
				require.GreaterOrEqual(t, m.GetCounter().GetValue(), 0.0, name)
			}
		}
	}
}

// The text itself: +Inf bucket line equal to the _count line.
func checkInfEqualsCount(t *testing.T, body string) {
	t.Helper()
	inf := map[string]string{}
	count := map[string]string{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		series, val := line[:sp], line[sp+1:]
		if i := strings.Index(series, `_bucket{`); i > 0 && strings.Contains(series, `le="+Inf"`) {
			key := series[:i] + "{" + strings.Replace(series[i+len("_bucket{"):], `le="+Inf"`, "", 1)
			key = strings.NewReplacer(",,", ",", "{,", "{", ",}", "}", "{}", "").Replace(key)
			inf[key] = val
		}
		if i := strings.Index(series, `_count`); i > 0 {
			count[series[:i]+series[i+len("_count"):]] = val
		}
	}
	require.NotEmpty(t, inf)
	for k, v := range inf {
		require.Equal(t, count[k], v, "%s: +Inf != _count", k)
	}
}

// values flattens a page into series -> value, histograms as their buckets,
// count and sum.
func values(mfs map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := name
			for _, lp := range m.GetLabel() {
				key += "," + lp.GetName() + "=" + lp.GetValue()
			}
			switch {
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Histogram != nil:
				out[key+"_count"] = float64(m.Histogram.GetSampleCount())
				out[key+"_sum"] = m.Histogram.GetSampleSum()
				for _, b := range m.Histogram.GetBucket() {
					out[key+",le="+strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)] = float64(b.GetCumulativeCount())
				}
			}
		}
	}
	return out
}

func TestInvariantsAcrossScrapes(t *testing.T) {
	f, clock := startFleet(t, nil)
	url := "http://" + f.Targets()[0] + "/metrics"
	var prev map[string]float64
	for _, step := range []time.Duration{0, 5 * time.Second, 37 * time.Second, 10 * time.Minute, 26 * time.Hour} {
		clock.Advance(step)
		_, body, _ := httpGet(t, url)
		mfs := parseText(t, body)
		checkInvariants(t, mfs)
		checkInfEqualsCount(t, body)
		for _, m := range DefaultModels {
			var success float64
			for _, r := range finishReasons {
				success += metricValue(t, mfs, "vllm:request_success_total", "model_name", m, "finished_reason", r)
			}
			require.Equal(t, success, metricValue(t, mfs, "vllm:e2e_request_latency_seconds", "model_name", m),
				"request_success_total sums to the histogram count")
			require.Equal(t, metricValue(t, mfs, "vllm:prompt_tokens_total", "model_name", m),
				histogramOf(t, mfs, "vllm:request_prompt_tokens", m).GetSampleSum())
		}
		cur := values(mfs)
		for k, v := range prev {
			require.GreaterOrEqual(t, cur[k], v, "%s decreased after %v", k, step)
		}
		prev = cur
	}
	got := metricValue(t, parseText(t, func() string { _, b, _ := httpGet(t, url); return b }()),
		"vllm:request_success_total", "finished_reason", "stop")
	require.Greater(t, got, 1000.0, "a day of traffic")
}

func TestLongGapKeepsRate(t *testing.T) {
	f, clock := startFleet(t, func(o *FleetOptions) { o.RequestRate = 3 })
	in := f.Instance(0)
	before := requestCount(t, in, "llama-3.1-8b-instruct")
	clock.Advance(2 * time.Hour) // 2h = 4 drift periods; spikes add a little
	start := time.Now()
	after := requestCount(t, in, "llama-3.1-8b-instruct")
	elapsed := time.Since(start)
	rate := (after - before) / 7200
	require.InDelta(t, 3.0, rate, 0.6, "requests per second after a long gap")
	t.Logf("2h advance: %v for %d requests", elapsed, int(after-before))
}

func requestCount(t *testing.T, in *Instance, modelName string) float64 {
	t.Helper()
	mfs := parseText(t, string(in.AppendMetrics(nil)))
	return float64(histogramOf(t, mfs, "vllm:e2e_request_latency_seconds", modelName).GetSampleCount())
}

func TestDeterministicUnderSeed(t *testing.T) {
	page := func(seed int64) string {
		clock := newFakeClock()
		f, err := NewFleet(FleetOptions{BasePort: 0, Instances: 2, Seed: seed, Now: clock.Now})
		require.NoError(t, err)
		defer f.Close()
		var out []byte
		for _, d := range []time.Duration{5 * time.Second, time.Minute, 3 * time.Minute} {
			clock.Advance(d)
			out = f.Instance(1).AppendMetrics(out[:0])
		}
		return string(out)
	}
	a, b, c := page(7), page(7), page(8)
	require.Equal(t, a, b, "same seed and clock, same page")
	require.NotEqual(t, a, c, "another seed, another page")
}

// meanOver returns Δsum/Δcount of a histogram over a window of simulated
// time.
func meanOver(t *testing.T, in *Instance, clock *clock.Fake, name, modelName string, d time.Duration) float64 {
	t.Helper()
	h0 := histogramOf(t, parseText(t, string(in.AppendMetrics(nil))), name, modelName)
	clock.Advance(d)
	h1 := histogramOf(t, parseText(t, string(in.AppendMetrics(nil))), name, modelName)
	n := float64(h1.GetSampleCount() - h0.GetSampleCount())
	require.Positive(t, n)
	return (h1.GetSampleSum() - h0.GetSampleSum()) / n
}

func TestSetSlowRaisesLatency(t *testing.T) {
	f, clock := startFleet(t, nil)
	in := f.Instance(0)
	const m = "qwen2.5-7b-instruct"
	base := meanOver(t, in, clock, "vllm:time_to_first_token_seconds", m, 30*time.Minute)
	baseITL := meanOver(t, in, clock, "vllm:inter_token_latency_seconds", m, 30*time.Minute)
	baseE2E := meanOver(t, in, clock, "vllm:e2e_request_latency_seconds", m, 30*time.Minute)
	require.InDelta(t, 0.1, base, 0.06, "TTFT mean at normal load")
	require.InDelta(t, 0.027, baseITL, 0.01, "ITL mean at normal load")
	require.Greater(t, baseE2E, 1.5)
	require.Less(t, baseE2E, 10.0)

	in.SetSlow(3)
	slow := meanOver(t, in, clock, "vllm:time_to_first_token_seconds", m, 30*time.Minute)
	slowITL := meanOver(t, in, clock, "vllm:inter_token_latency_seconds", m, 30*time.Minute)
	t.Logf("TTFT mean %.3fs -> %.3fs (x%.2f), ITL %.4fs -> %.4fs (x%.2f)",
		base, slow, slow/base, baseITL, slowITL, slowITL/baseITL)
	require.InDelta(t, 3, slow/base, 0.9, "TTFT ratio")
	require.InDelta(t, 3, slowITL/baseITL, 0.9, "ITL ratio")

	mfs := scrape(t, f, 0)
	require.Greater(t, metricValue(t, mfs, "vllm:num_requests_running", "model_name", m), 5.0,
		"a slow engine holds more requests")
}

func TestRestartResetsCounters(t *testing.T) {
	f, clock := startFleet(t, nil)
	in := f.Instance(1)
	clock.Advance(10 * time.Minute)
	before := scrape(t, f, 1)
	require.Greater(t, metricValue(t, before, "vllm:prompt_tokens_total"), 0.0)
	start0 := metricValue(t, before, "process_start_time_seconds")

	clock.Advance(time.Minute)
	in.Restart()
	after := scrape(t, f, 1)
	require.Equal(t, 0.0, metricValue(t, after, "vllm:prompt_tokens_total"))
	require.Equal(t, 0.0, metricValue(t, after, "vllm:request_success_total", "finished_reason", "stop"))
	require.Equal(t, 0.0, metricValue(t, after, "vllm:time_to_first_token_seconds"))
	require.Equal(t, 0.0, metricValue(t, after, "process_cpu_seconds_total"))
	now := float64(clock.Now().Unix())
	require.InDelta(t, now, metricValue(t, after, "process_start_time_seconds"), 1)
	require.Greater(t, metricValue(t, after, "process_start_time_seconds"), start0)
	require.InDelta(t, now, metricValue(t, after, "vllm:prompt_tokens_created"), 1)

	clock.Advance(time.Minute)
	require.Greater(t, metricValue(t, scrape(t, f, 1), "vllm:prompt_tokens_total"), 0.0, "counting again")
	require.Greater(t, metricValue(t, scrape(t, f, 0), "process_cpu_seconds_total"), 0.0, "other instance untouched")
}

func TestSetDown(t *testing.T) {
	f, clock := startFleet(t, nil)
	in := f.Instance(0)
	base := "http://" + f.Targets()[0]
	clock.Advance(time.Minute)
	count := requestCount(t, in, "llama-3.1-8b-instruct")

	in.SetDown(true)
	for _, path := range []string{"/metrics", "/health", "/v1/models", "/version"} {
		code, _, _ := httpGet(t, base+path)
		require.Equal(t, 503, code, path)
	}
	code, _ := httpPost(t, base+"/v1/chat/completions", `{"stream":true}`)
	require.Equal(t, 503, code)
	code, _, _ = httpGet(t, "http://"+f.Targets()[1]+"/health")
	require.Equal(t, 200, code, "the other instance is up")

	clock.Advance(10 * time.Minute)
	code, _ = httpPost(t, base+"/demo/control", `{"down": false}`)
	require.Equal(t, 200, code)
	code, _, _ = httpGet(t, base+"/health")
	require.Equal(t, 200, code)
	require.Equal(t, count, requestCount(t, in, "llama-3.1-8b-instruct"), "no traffic while down")
}

// TestSetQueueAndDecodeSlow: a standing backlog raises the queue time, the
// waiting requests and the KV cache and leaves prefill and decode alone;
// a slow decode raises decode alone.
func TestSetQueueAndDecodeSlow(t *testing.T) {
	f, clock := startFleet(t, nil)
	in := f.Instance(0)
	const m = "qwen2.5-7b-instruct"
	mean := func(name string) float64 { return meanOver(t, in, clock, name, m, 10*time.Minute) }
	q0, p0, d0 := mean("vllm:request_queue_time_seconds"), mean("vllm:request_prefill_time_seconds"), mean("vllm:request_decode_time_seconds")

	in.SetQueue(20)
	q1, p1, d1 := mean("vllm:request_queue_time_seconds"), mean("vllm:request_prefill_time_seconds"), mean("vllm:request_decode_time_seconds")
	t.Logf("queue %.3fs -> %.3fs, prefill %.3fs -> %.3fs, decode %.3fs -> %.3fs", q0, q1, p0, p1, d0, d1)
	require.Greater(t, q1, q0+3, "the backlog waits")
	require.InDelta(t, 1, p1/p0, 0.25)
	require.InDelta(t, 1, d1/d0, 0.25)
	mfs := scrape(t, f, 0)
	require.GreaterOrEqual(t, metricValue(t, mfs, "vllm:num_requests_waiting", "model_name", m), 20.0)
	require.Greater(t, metricValue(t, mfs, "vllm:kv_cache_usage_perc", "model_name", m), 0.95)

	in.SetQueue(0)
	in.SetDecodeSlow(3)
	q2, d2 := mean("vllm:request_queue_time_seconds"), mean("vllm:request_decode_time_seconds")
	require.InDelta(t, 3, d2/d0, 0.9, "decode ratio")
	require.Less(t, q2, q0*2+0.01, "the queue is back to normal")

	in.SetDecodeSlow(-1)
	require.Equal(t, 1.0, in.controlState().DecodeSlow)
}
