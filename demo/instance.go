package demo

import (
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Instance is one simulated vLLM server. All methods are safe for
// concurrent use. It implements http.Handler.
type Instance struct {
	index int
	opts  *FleetOptions // shared with the fleet, read-only
	ln    net.Listener  // nil for an instance built without a fleet listener
	addr  string

	isDown atomic.Bool // mirrors down, read without mu on every request

	mu         sync.Mutex
	rng        *rand.Rand
	last       time.Time // simulation time reached
	slow       float64
	backlog    float64 // standing queue per model (SetQueue)
	decodeSlow float64 // decode-only factor (SetDecodeSlow)
	down       bool
	firstToken time.Duration
	perToken   time.Duration
	created    float64 // value of every *_created sample from start-up
	proc       processState
	models     []modelState
	http       httpStats
	reqSeq     uint64

	segs         []segment // compiled page, see compilePage
	staticSeries int
	bodyHint     int // size of the last page, to allocate once
}

func newInstance(index int, opts *FleetOptions) *Instance {
	in := &Instance{
		index: index,
		opts:  opts,
		rng:   rand.New(rand.NewPCG(uint64(opts.Seed), mix64(uint64(index)+1))),
		slow:  1,
		// decodeSlow multiplies inter-token times only.
		decodeSlow: 1,
	}
	for m, name := range opts.Models {
		ms := newModelState(name)
		ms.key = mix64(uint64(opts.Seed) ^ mix64(uint64(index)<<16|uint64(m)))
		ms.phase = 2 * math.Pi * float64(ms.key%1000) / 1000
		in.models = append(in.models, ms)
	}
	p := &in.proc
	p.vmem = 1.17061632e10 + float64(in.rng.IntN(64))*4096*1024
	p.rssBase = 2.19e9 + float64(in.rng.IntN(256))*1024*1024
	p.maxFds = 1048576
	in.startLocked(opts.Now())
	in.compilePage()
	return in
}

// startLocked is a process start: counters from zero, start time now.
func (in *Instance) startLocked(now time.Time) {
	sec := float64(now.UnixNano()) / 1e9
	in.created = sec
	in.last = now
	p := &in.proc
	p.start = math.Floor(sec*100) / 100
	p.cpu, p.cpuAcc = 0, 0
	clear(p.gcCollected[:])
	clear(p.gcCollections[:])
	clear(p.gcUncollectable[:])
	p.rss = p.rssBase
	p.openFds = 62 + float64(len(in.models)*3)
	for m := range in.models {
		in.models[m].reset()
	}
	in.http.reset(sec)
}

func (in *Instance) createdNow() float64 { return float64(in.opts.Now().UnixNano()) / 1e9 }

// Index is the instance's position in the fleet.
func (in *Instance) Index() int { return in.index }

// Addr is the host:port the instance listens on.
func (in *Instance) Addr() string { return in.addr }

// Models lists the model names the instance serves. The list never
// changes after construction.
func (in *Instance) Models() []string {
	out := make([]string, len(in.models))
	for i := range in.models {
		out[i] = in.models[i].name
	}
	return out
}

// SetSlow multiplies every latency the instance produces (TTFT, per-token,
// e2e, queue, prefill, decode, and the delays of the streaming endpoint) by
// factor; 1 is normal. The simulation is first advanced to now, so traffic
// before the call keeps the old factor. A factor that is not a positive
// number is taken as 1.
func (in *Instance) SetSlow(factor float64) {
	if !(factor > 0) || math.IsInf(factor, 0) {
		factor = 1
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.advanceLocked(in.opts.Now())
	in.slow = factor
	in.updateGaugesLocked(in.last)
}

// SetQueue gives every model of the instance a standing backlog of n
// requests the scheduler does not admit (the KV cache is full): n more
// requests waiting, KV-cache usage near 100 %, and each request's queue
// time longer by n / arrival rate (Little's law); prefill and decode stay
// as they were. 0 clears it; a negative or non-finite n is taken as 0.
func (in *Instance) SetQueue(n float64) {
	if !(n > 0) || math.IsInf(n, 0) {
		n = 0
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.advanceLocked(in.opts.Now())
	in.backlog = math.Round(n)
	in.updateGaugesLocked(in.last)
}

// SetDecodeSlow multiplies the decode phase alone (every inter-token time,
// so TPOT, ITL, decode and e2e) by factor; queue and prefill stay. With
// longer requests more run at once (Little's law). 1 is normal; a factor
// that is not a positive number is taken as 1.
func (in *Instance) SetDecodeSlow(factor float64) {
	if !(factor > 0) || math.IsInf(factor, 0) {
		factor = 1
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.advanceLocked(in.opts.Now())
	in.decodeSlow = factor
	in.updateGaugesLocked(in.last)
}

// Slow returns the current slow factor.
func (in *Instance) Slow() float64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.slow
}

// SetStreamDelays fixes the delay before the first token and between tokens
// of the completion endpoints (before the slow factor). Zero for either
// derives it from the simulation, like the traffic on /metrics.
func (in *Instance) SetStreamDelays(firstToken, perToken time.Duration) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.firstToken, in.perToken = max(0, firstToken), max(0, perToken)
}

// SetDown makes /metrics, /health, /version and the API answer 503 (the
// control endpoint keeps working). No traffic is simulated while down.
func (in *Instance) SetDown(down bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	now := in.opts.Now()
	in.advanceLocked(now)
	in.down = down
	in.last = now
	in.downFlag(down)
}

func (in *Instance) downFlag(down bool) { in.isDown.Store(down) }

// Down reports whether the instance is down.
func (in *Instance) Down() bool { return in.isDown.Load() }

// Restart simulates a process restart: process_start_time_seconds and the
// _created samples move to now, counters and histograms start again from 0.
// Slow factor, stream delays and down state are kept.
func (in *Instance) Restart() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.startLocked(in.opts.Now())
}

// AppendMetrics advances the simulation to now and appends the /metrics
// page (text format 0.0.4) to dst.
func (in *Instance) AppendMetrics(dst []byte) []byte {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.advanceLocked(in.opts.Now())
	if cap(dst)-len(dst) < in.bodyHint {
		dst = append(make([]byte, 0, len(dst)+in.bodyHint+in.bodyHint/8), dst...)
	}
	start := len(dst)
	dst = renderSegments(dst, in.segs)
	dst = in.http.appendTo(dst)
	in.bodyHint = len(dst) - start
	return dst
}

// SeriesCount is the number of samples on the /metrics page right now. It
// grows by a few when an HTTP handler or status class is used the first
// time.
func (in *Instance) SeriesCount() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.staticSeries + in.http.series()
}
