// Package history generates the benchmarks' long vLLM-like history: a
// fleet of models on instances with latency histograms, request and token
// counters and queue gauges, deterministic in its seed and never holding
// more than one timestamp's values. bench/tiers and bench/dashboard store
// the same shape of data through it.
package history

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"
)

// e2eBuckets are vLLM's upper bounds of vllm:e2e_request_latency_seconds
// (/work/shared/fixtures/README.md); +Inf is added after them.
var e2eBuckets = [...]float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}

// modelNames name the models of the simulated fleet; more models than
// these get a numeric suffix.
var modelNames = []string{"llama-3.1-8b-instruct", "qwen2.5-7b-instruct", "mistral-7b-instruct-v0.3", "gemma-2-9b-it", "phi-3-mini-4k-instruct"}

// Indexes of the series of one group (one model on one instance), in the
// order they are written.
const (
	sBucket0       = 0                   // e2e latency buckets, then +Inf
	sSum           = len(e2eBuckets) + 1 // _sum
	sCount         = sSum + 1            // _count
	sSuccessStop   = sCount + 1          // request_success_total{finished_reason="stop"}
	sSuccessLen    = sSuccessStop + 1    // ...="length"
	sSuccessAbort  = sSuccessLen + 1     // ...="abort"
	sPromptTokens  = sSuccessAbort + 1   // prompt_tokens_total
	sGenTokens     = sPromptTokens + 1   // generation_tokens_total
	sWaiting       = sGenTokens + 1      // num_requests_waiting (gauge, spikes)
	sRunning       = sWaiting + 1        // num_requests_running (gauge)
	sKVCache       = sRunning + 1        // kv_cache_usage_perc (gauge)
	SeriesPerGroup = sKVCache + 1        // 32
	nCounters      = sGenTokens + 1      // series 0..nCounters-1 are cumulative
	nBucketSeries  = len(e2eBuckets) + 1 // with +Inf
	latencySigma   = 0.6                 // of the log-normal latency
	maxRunning     = 256                 // vLLM's default max_num_seqs
	day            = float64(24 * time.Hour / time.Millisecond)
	restartEvery   = 3 * 24 * time.Hour // mean time between process restarts
	spikeEvery     = 6 * time.Hour      // mean time between queue spikes
	TypeLines      = "# TYPE vllm:e2e_request_latency_seconds histogram\n" +
		"# TYPE vllm:request_success_total counter\n# TYPE vllm:prompt_tokens_total counter\n" +
		"# TYPE vllm:generation_tokens_total counter\n# TYPE vllm:num_requests_waiting gauge\n" +
		"# TYPE vllm:num_requests_running gauge\n# TYPE vllm:kv_cache_usage_perc gauge\n"
)

// Config sizes the simulated fleet and its time range.
type Config struct {
	Models    int
	Instances int
	Start     time.Time // exclusive: the first sample is at Start+Interval
	End       time.Time // inclusive
	Interval  time.Duration
	Seed      uint64
}

// group is the state of one model on one instance: its counters, gauges
// and its own random stream, so the output does not depend on how the
// steps are consumed.
type group struct {
	rng       *rand.Rand
	rps       float64 // mean requests per second
	median    float64 // mean median latency, seconds
	phase     float64 // of the daily load curve
	counters  [nCounters]float64
	spikeLeft int     // steps left in a queue spike
	spikeVal  float64 // height of the current spike
	restarts  int
}

// Gen produces vLLM-like samples, one timestamp at a time, for every series
// of the fleet. It is deterministic in its config and never holds more
// than one timestamp's values.
type Gen struct {
	cfg      Config
	groups   []*group
	prefixes [][]byte // per series: `name{labels} `
	values   []float64
	t        int64 // timestamp of the last step, ms
	end      int64
	step     int64
}

func New(cfg Config) *Gen {
	g := &Gen{cfg: cfg, t: cfg.Start.UnixMilli(), end: cfg.End.UnixMilli(), step: cfg.Interval.Milliseconds()}
	for m := 0; m < cfg.Models; m++ {
		for i := 0; i < cfg.Instances; i++ {
			idx := uint64(m*cfg.Instances + i)
			r := rand.New(rand.NewPCG(cfg.Seed, idx))
			g.groups = append(g.groups, &group{
				rng:    r,
				rps:    1 + 6*r.Float64(),
				median: 1.5 + 3*r.Float64(),
				phase:  2 * math.Pi * r.Float64(),
			})
			g.prefixes = append(g.prefixes, groupPrefixes(ModelName(m), fmt.Sprintf("10.0.%d.%d:8000", i/250, i%250+1))...)
		}
	}
	g.values = make([]float64, len(g.prefixes))
	return g
}

func ModelName(m int) string {
	if m < len(modelNames) {
		return modelNames[m]
	}
	return fmt.Sprintf("%s-%d", modelNames[m%len(modelNames)], m/len(modelNames))
}

// groupPrefixes returns the `name{labels} ` prefix of every series of one
// group, in the order of the s* constants.
func groupPrefixes(model, instance string) [][]byte {
	common := fmt.Sprintf(`engine="0",instance=%q,job="vllm",model_name=%q`, instance, model)
	p := make([][]byte, 0, SeriesPerGroup)
	add := func(name, extra string) {
		if extra != "" {
			extra = "," + extra
		}
		p = append(p, []byte(name+"{"+common+extra+"} "))
	}
	for _, le := range e2eBuckets {
		add("vllm:e2e_request_latency_seconds_bucket", fmt.Sprintf("le=%q", strconv.FormatFloat(le, 'f', -1, 64)))
	}
	add("vllm:e2e_request_latency_seconds_bucket", `le="+Inf"`)
	add("vllm:e2e_request_latency_seconds_sum", "")
	add("vllm:e2e_request_latency_seconds_count", "")
	for _, r := range []string{"stop", "length", "abort"} {
		add("vllm:request_success_total", fmt.Sprintf("finished_reason=%q", r))
	}
	add("vllm:prompt_tokens_total", "")
	add("vllm:generation_tokens_total", "")
	add("vllm:num_requests_waiting", "")
	add("vllm:num_requests_running", "")
	add("vllm:kv_cache_usage_perc", "")
	return p
}

// NumSeries is the number of series the fleet writes.
func (g *Gen) NumSeries() int { return len(g.prefixes) }

// NumSteps is the number of timestamps from Start (exclusive) to End.
func (g *Gen) NumSteps() int64 {
	return (g.end - g.cfg.Start.UnixMilli()) / g.step
}

// Next advances one interval and fills g.values; false after End.
func (g *Gen) Next() (int64, bool) {
	t := g.t + g.step
	if t > g.end {
		return 0, false
	}
	g.t = t
	dt := g.cfg.Interval.Seconds()
	for gi, gr := range g.groups {
		gr.advance(t, dt, g.values[gi*SeriesPerGroup:(gi+1)*SeriesPerGroup])
	}
	return t, true
}

func (gr *group) advance(t int64, dt float64, out []float64) {
	r := gr.rng
	// A process restart now and then: every counter starts from zero.
	if r.Float64() < dt/restartEvery.Seconds() {
		gr.counters = [nCounters]float64{}
		gr.restarts++
	}
	load := 1 + 0.6*math.Sin(2*math.Pi*float64(t)/day+gr.phase)
	lambda := gr.rps * load * dt
	n := math.Max(0, math.Round(lambda+math.Sqrt(lambda)*r.NormFloat64()))

	// Queue spikes: mostly a few minutes, some of a single sample.
	if gr.spikeLeft == 0 && r.Float64() < dt/spikeEvery.Seconds() {
		gr.spikeLeft = 1
		if r.Float64() < 0.7 {
			gr.spikeLeft += r.IntN(20)
		}
		gr.spikeVal = float64(30 + r.IntN(270))
	}
	waiting := math.Max(0, math.Round(2*(load-0.6)+r.NormFloat64()))
	slow := 1.0
	if gr.spikeLeft > 0 {
		waiting += gr.spikeVal
		slow = 3
		gr.spikeLeft--
	}

	// Latencies: log-normal around a median that grows with load. Bucket
	// counts are n times the CDF, rounded, so they stay cumulative.
	median := gr.median * (0.7 + 0.5*load) * slow * math.Exp(0.1*r.NormFloat64())
	lnMed := math.Log(median)
	c := &gr.counters
	for i, le := range e2eBuckets {
		cdf := 0.5 * math.Erfc(-(math.Log(le)-lnMed)/(latencySigma*math.Sqrt2))
		c[sBucket0+i] += math.Round(n * cdf)
	}
	c[sBucket0+len(e2eBuckets)] += n
	c[sSum] += math.Round(n*median*math.Exp(latencySigma*latencySigma/2)*1000) / 1000
	c[sCount] += n
	stop := math.Round(0.85 * n)
	length := math.Min(n-stop, math.Round(0.13*n))
	c[sSuccessStop] += stop
	c[sSuccessLen] += length
	c[sSuccessAbort] += n - stop - length
	c[sPromptTokens] += math.Round(n * (600 + 400*r.Float64()))
	c[sGenTokens] += math.Round(n * (200 + 100*r.Float64()))

	copy(out, c[:])
	running := math.Min(maxRunning, math.Round(gr.rps*load*median))
	out[sWaiting] = waiting
	out[sRunning] = running
	out[sKVCache] = math.Round(math.Min(1, math.Max(0, running/maxRunning+0.05*r.Float64()))*1e4) / 1e4
}

// Format is how a sample line's timestamp is written.
type Format int

const (
	FormatPrometheus  Format = iota // text 0.0.4, milliseconds
	FormatOpenMetrics               // OpenMetrics, seconds
)

// AppendStep writes the lines of the current values at t.
func (g *Gen) AppendStep(buf []byte, t int64, f Format) []byte {
	for i, p := range g.prefixes {
		buf = append(buf, p...)
		buf = strconv.AppendFloat(buf, g.values[i], 'g', -1, 64)
		buf = append(buf, ' ')
		if f == FormatOpenMetrics {
			buf = strconv.AppendInt(buf, t/1000, 10)
			if ms := t % 1000; ms != 0 {
				buf = append(buf, '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
			}
		} else {
			buf = strconv.AppendInt(buf, t, 10)
		}
		buf = append(buf, '\n')
	}
	return buf
}
