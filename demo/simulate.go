package demo

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"time"
)

// Simulation constants. The latencies are medians at normal load before the
// slow factor; together they give a TTFT median near 80 ms, an ITL near
// 25 ms and an e2e latency of a few seconds, the shape of the fixture
// vllm.prom (an 8B model on one H100).
const (
	// advanceChunk is the time step of the lazy simulation. A 5 s scrape
	// interval advances one chunk per model.
	advanceChunk = 5 * time.Second
	// maxChunks caps the work of one advance: after a long gap (a laptop
	// that slept, a test that moved its clock by hours) the gap is cut into
	// at most this many chunks instead of one per advanceChunk.
	maxChunks = 60
	// repsPerAdvance caps the requests sampled one by one per advance and
	// model (at least minRepsPerChunk per chunk). Above it, each sampled
	// request stands for several (integer weights), so counts stay exact
	// and the cost stays bounded: a scrape after ten idle minutes costs
	// ~1 ms instead of ~5 ms with 32 per chunk (BenchmarkAdvanceAfterIdle).
	repsPerAdvance  = 256
	minRepsPerChunk = 4
	// driftPeriod is the period of the slow sinusoidal load drift.
	driftPeriod = 30 * time.Minute
	// batchCapacity is the concurrency at which the engine saturates and
	// requests start to wait: vLLM's max_num_seqs is 256, and the fixture's
	// KV cache (224k tokens) holds about 200 sequences of ~1k tokens. Normal
	// load (2 req/s, ~5 s each) keeps about 10 running, so a slow factor of 3
	// shows as 3× latencies, and only a spike on a very slow instance
	// saturates it.
	batchCapacity = 192
	// kvCacheTokens is num_gpu_blocks·block_size from the fixture's
	// cache_config_info (14022·16).
	kvCacheTokens = 14022 * 16
	maxModelLen   = 8192

	queueMedian   = 0.004 // s
	prefillBase   = 0.020 // s, scheduling and first forward pass
	ttftOverhead  = 0.002 // s, detokenize and send
	itlTokenSigma = 0.3   // spread of single inter-token gaps around a request's mean
)

// modelProfile is what distinguishes one served model from another. It is
// derived from the model name so two fleets with the same models look alike.
type modelProfile struct {
	promptMedian   float64 // tokens
	outMedian      float64 // tokens
	prefillTPS     float64 // prompt tokens per second
	itlMedian      float64 // seconds
	prefixHitRatio float64
}

func profileFor(name string) modelProfile {
	h := fnv.New64a()
	h.Write([]byte(name))
	s := h.Sum64()
	j := func(k uint) float64 { return 0.85 + 0.3*float64((s>>(k*8))&0xff)/255 }
	return modelProfile{
		promptMedian:   550 * j(0),
		outMedian:      140 * j(1),
		prefillTPS:     11000 * j(2),
		itlMedian:      0.025 * j(3),
		prefixHitRatio: 0.38 * j(4),
	}
}

// load is the state of one model's engine at some instant.
type load struct {
	rate        float64 // requests per second arriving
	conc        float64 // requests in the engine (Little's law)
	util        float64 // conc / batchCapacity
	ttftF, itlF float64 // load multipliers, before the slow factor
	queue       float64 // median queue time in seconds, slow factor included
}

// simRequest is one sampled request, all times in seconds.
type simRequest struct {
	prompt, out, maxTokens float64
	hasMaxTokens           bool
	finish                 int
	queue, prefill, ttft   float64
	itlMean, decode, e2e   float64
	hits                   float64
	handler                string
	stream                 bool
}

const (
	finishStop = iota
	finishLength
	finishAbort
)

var finishReasons = [...]string{"stop", "length", "abort"}

// mix64 is splitmix64's finaliser, used to derive per-window randomness
// from the seed without touching the instance's random stream.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// rateAt is the arrival rate of model m at time t: the configured mean, a
// ±35 % sinusoid over driftPeriod, and in about 4 % of the minutes a 15 s
// spike of 2.5–4.5×. It depends only on the seed and t, so every
// instance's load curve is reproducible whatever the scrape times.
func (in *Instance) rateAt(m int, t time.Time) float64 {
	sec := float64(t.UnixNano()) / 1e9
	ms := &in.models[m]
	r := in.opts.RequestRate * (1 + 0.35*math.Sin(2*math.Pi*sec/driftPeriod.Seconds()+ms.phase))
	window := math.Floor(sec / 60)
	h := mix64(ms.key ^ uint64(int64(window)))
	if h%100 < 4 {
		start := float64((h >> 8) % 40)
		if off := sec - window*60; off >= start && off < start+15 {
			r *= 2.5 + float64((h>>16)%3)
		}
	}
	return r
}

func (in *Instance) loadAt(m int, rate float64) load {
	p := &in.models[m].prof
	// Mean e2e: TTFT plus mean output (median·e^(σ²/2), σ=0.8) times ITL.
	e2e := (0.08 + p.outMedian*1.377*p.itlMedian*in.decodeSlow) * in.slow
	l := load{rate: rate, conc: rate * e2e}
	l.util = l.conc / batchCapacity
	l.itlF = 1 + 0.3*math.Min(l.util, 1)
	over := math.Max(0, l.util-0.5)
	l.ttftF = 1 + 2*over*over
	l.queue = queueMedian * in.slow * (1 + 50*math.Pow(math.Max(0, l.util-0.7), 2))
	if l.conc > batchCapacity && rate > 0 {
		// Saturated: the backlog drains at the arrival rate.
		l.queue += (l.conc - batchCapacity) / rate
	}
	if in.backlog > 0 && rate > 0 {
		// A standing backlog (SetQueue) drains at the arrival rate.
		l.queue += in.backlog / rate
	}
	return l
}

func logNormal(r *rand.Rand, median, sigma float64) float64 {
	return median * math.Exp(sigma*r.NormFloat64())
}

func poisson(r *rand.Rand, mean float64) float64 {
	switch {
	case mean <= 0:
		return 0
	case mean < 30:
		// Knuth's method: fine for small means.
		l, k, p := math.Exp(-mean), 0.0, 1.0
		for {
			p *= r.Float64()
			if p <= l {
				return k
			}
			k++
		}
	default:
		return math.Max(0, math.Round(mean+math.Sqrt(mean)*r.NormFloat64()))
	}
}

var maxTokensChoices = [...]float64{256, 512, 512, 1024, 1024, 2048, 4096}

// sampleRequest draws one request of model m under load l.
func (in *Instance) sampleRequest(m int, l load) simRequest {
	r := in.rng
	p := &in.models[m].prof
	var q simRequest
	q.prompt = math.Max(4, math.Min(7000, math.Round(logNormal(r, p.promptMedian, 0.9))))
	q.maxTokens = maxModelLen - q.prompt
	if r.Float64() < 0.62 {
		q.hasMaxTokens = true
		q.maxTokens = maxTokensChoices[r.IntN(len(maxTokensChoices))]
	}
	q.out = math.Max(1, math.Round(logNormal(r, p.outMedian, 0.8)))
	q.finish = finishStop
	if q.out >= q.maxTokens {
		q.out, q.finish = q.maxTokens, finishLength
	}
	q.queue = logNormal(r, l.queue, 1.0)
	q.prefill = (prefillBase + q.prompt/p.prefillTPS) * logNormal(r, 1, 0.25) * l.ttftF * in.slow
	q.ttft = q.queue + q.prefill + ttftOverhead*in.slow
	q.itlMean = logNormal(r, p.itlMedian, 0.2) * l.itlF * in.slow * in.decodeSlow
	q.decode = (q.out - 1) * q.itlMean
	q.e2e = q.ttft + q.decode
	q.hits = math.Min(q.prompt, math.Floor(q.prompt*p.prefixHitRatio*2*r.Float64()/16)*16)
	q.handler = "/v1/chat/completions"
	if r.Float64() < 0.1 {
		q.handler = "/v1/completions"
	}
	q.stream = r.Float64() < 0.7
	return q
}

// recordRequest adds w requests like q to model m's metrics.
func (in *Instance) recordRequest(m int, q *simRequest, w float64) {
	ms := &in.models[m]
	ms.promptHist.observe(q.prompt, w)
	ms.genHist.observe(q.out, w)
	ms.maxGenHist.observe(q.out, w)
	ms.paramsN.observe(1, w)
	if q.hasMaxTokens {
		ms.paramsMaxTokens.observe(q.maxTokens, w)
	}
	ms.iteration.observe(q.prompt, w) // the prefill step
	ms.ttft.observe(q.ttft, w)
	ms.e2e.observe(q.e2e, w)
	ms.queue.observe(q.queue, w)
	ms.inference.observe(q.prefill+q.decode, w)
	ms.prefill.observe(q.prefill, w)
	ms.decode.observe(q.decode, w)
	if k := w * (q.out - 1); k > 0 {
		mu := math.Log(q.itlMean) - itlTokenSigma*itlTokenSigma/2
		ms.itl.observeLogNormal(k, mu, itlTokenSigma, k*q.itlMean, &ms.tpot)
	}
	ms.promptTokens += w * q.prompt
	ms.genTokens += w * q.out
	ms.prefixQueries += w * q.prompt
	ms.prefixHits += w * q.hits
	ms.success[q.finish] += w

	reqSize := 180 + 4.2*q.prompt
	respSize := 0.0 // streamed responses observe 0 bytes
	if !q.stream {
		respSize = 320 + 4.5*q.out
	}
	in.http.record(in.createdNow(), q.handler, "POST", "2xx", reqSize, respSize, q.e2e, w)
}

// advanceLocked moves the simulation from in.last to now. It is the only
// place simulated traffic is added. in.mu must be held.
func (in *Instance) advanceLocked(now time.Time) {
	if !now.After(in.last) {
		return
	}
	if in.down {
		in.last = now
		return
	}
	dt := now.Sub(in.last)
	chunks := int(dt/advanceChunk) + 1
	if chunks > maxChunks {
		chunks = maxChunks
	}
	step := dt / time.Duration(chunks)
	secs := step.Seconds()
	reps := max(minRepsPerChunk, repsPerAdvance/chunks)
	var requests float64
	for c := 0; c < chunks; c++ {
		mid := in.last.Add(step*time.Duration(c) + step/2)
		for m := range in.models {
			requests += in.simulateChunk(m, mid, secs, reps)
		}
	}
	in.last = now
	in.updateGaugesLocked(now)
	in.advanceProcess(dt.Seconds(), requests)
}

// simulateChunk adds the requests of model m that finished during a chunk
// of secs seconds around mid, and returns how many there were.
func (in *Instance) simulateChunk(m int, mid time.Time, secs float64, maxReps int) float64 {
	rate := in.rateAt(m, mid)
	l := in.loadAt(m, rate)
	n := poisson(in.rng, rate*secs)
	if n == 0 {
		return 0
	}
	reps := math.Min(n, float64(maxReps))
	base := math.Floor(n / reps)
	extra := n - base*reps
	var gen float64
	for i := 0.0; i < reps; i++ {
		w := base
		if i < extra {
			w++
		}
		q := in.sampleRequest(m, l)
		in.recordRequest(m, &q, w)
		gen += w * q.out
	}
	ms := &in.models[m]
	// Decode steps: the batch emits one token per running request per step.
	batch := math.Max(1, l.conc)
	const sigma = 0.5
	ms.iteration.observeLogNormal(math.Max(1, math.Round(gen/batch)), math.Log(batch)-sigma*sigma/2, sigma, gen, nil)
	if kv := ms.kvUsage; kv > 0.9 {
		ms.preemptions += poisson(in.rng, n*(kv-0.9)*0.5)
	}
	// /v1/models is polled now and then by clients and load balancers.
	if w := poisson(in.rng, n/40); w > 0 {
		in.http.record(in.createdNow(), "/v1/models", "GET", "2xx", 0, 489, 0.0018, w)
	}
	return n
}

// updateGaugesLocked sets running, waiting and KV-cache usage from the load
// at now plus the requests being served for real.
func (in *Instance) updateGaugesLocked(now time.Time) {
	if in.down {
		return
	}
	for m := range in.models {
		ms := &in.models[m]
		l := in.loadAt(m, in.rateAt(m, now))
		conc := poisson(in.rng, l.conc)
		running := math.Min(conc, batchCapacity) + float64(ms.inflight)
		waiting := math.Max(0, conc-batchCapacity)
		if l.util > 0.8 {
			waiting += poisson(in.rng, (l.util-0.8)*10)
		}
		p := &ms.prof
		kv := running * (p.promptMedian*1.5 + p.outMedian*0.7) * logNormal(in.rng, 1, 0.15) / kvCacheTokens
		if in.backlog > 0 {
			// The backlog waits because the KV cache is full.
			waiting += in.backlog
			kv = math.Max(kv, 0.96+0.03*in.rng.Float64())
		}
		ms.running, ms.waiting, ms.kvUsage = running, waiting, math.Min(1, kv)
	}
}

// advanceProcess moves the process_* and python_gc_* families: CPU time
// grows with load, the collector runs with allocation.
func (in *Instance) advanceProcess(secs, requests float64) {
	p := &in.proc
	p.cpuAcc += secs*0.04 + requests*0.012
	p.cpu = math.Round(p.cpuAcc*100) / 100
	c0 := poisson(in.rng, secs*0.1+requests*0.9)
	c1 := poisson(in.rng, c0/11)
	c2 := poisson(in.rng, c1/22)
	p.gcCollections[0] += c0
	p.gcCollections[1] += c1
	p.gcCollections[2] += c2
	p.gcCollected[0] += poisson(in.rng, c0*47)
	p.gcCollected[1] += poisson(in.rng, c1*33)
	p.gcCollected[2] += poisson(in.rng, c2*147)
	p.rss = math.Round(p.rssBase * logNormal(in.rng, 1, 0.002))
	var inflight int
	for m := range in.models {
		inflight += in.models[m].inflight
	}
	p.openFds = 62 + float64(len(in.models)*3+inflight)
}
