package explain

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"
)

// Statuses of a Report.
const (
	// StatusRise: the P95 rose at Report.At (found, or the given time).
	StatusRise = "rise"
	// StatusSteady: no rise in the lookback; the windows are the last
	// ones.
	StatusSteady = "steady"
	// StatusNoData: the service has no request time in storage.
	StatusNoData = "no_data"
)

// Options of Explain. Zero values take the defaults.
type Options struct {
	// Now is the end of the data read (required).
	Now time.Time
	// At is when the change happened (an alert's start); zero finds it in
	// the P95 series.
	At time.Time
	// Lookback is how far back a rise is looked for (default 1 h).
	Lookback time.Duration
	// Step is the resolution of the P95 series (default max(15 s,
	// lookback/240)).
	Step time.Duration
	// Rate is the window of each P95 point (default max(1 m, step)).
	Rate time.Duration
	// Window caps the before and after windows (default 10 m).
	Window time.Duration
}

func (o *Options) defaults() {
	if o.Lookback <= 0 {
		o.Lookback = time.Hour
	}
	if o.Step <= 0 {
		o.Step = max(15*time.Second, o.Lookback/240).Truncate(time.Second)
	}
	if o.Rate <= 0 {
		o.Rate = max(time.Minute, o.Step)
	}
	if o.Window <= 0 {
		o.Window = 10 * time.Minute
	}
}

// Window is a time range in Unix seconds.
type Window struct {
	From float64 `json:"from"`
	To   float64 `json:"to"`
}

// Change is a value in the before and the after window.
type Change struct {
	Before Num `json:"before"`
	After  Num `json:"after"`
}

// PhaseChange is one phase's mean (and P95) before and after, its change,
// and its share of the change of the mean request time.
type PhaseChange struct {
	Name      string `json:"name"`
	Before    Num    `json:"before"`
	After     Num    `json:"after"`
	Delta     Num    `json:"delta"`
	Share     Num    `json:"share"`
	P95Before Num    `json:"p95_before"`
	P95After  Num    `json:"p95_after"`
}

// SignalChange is one signal's level before and after.
type SignalChange struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Unit   string `json:"unit"`
	Before Num    `json:"before"`
	After  Num    `json:"after"`
	// Moved: the change is beyond the signal's floor and 20 % of its
	// level before.
	Moved bool `json:"moved"`
	// Score ranks signals: the change over max(|before|, floor).
	Score Num    `json:"score"`
	Text  string `json:"text"`
	// Link opens the signal's chart around the change (/explore).
	Link  string `json:"link"`
	Panel string `json:"panel,omitempty"`
}

// Report is Explain's answer.
type Report struct {
	Service string `json:"service"`
	Status  string `json:"status"`
	// Summary says it in words: "P95 1.5 s → 2.8 s since 14:05; queue
	// time accounts for 85% of the rise; KV cache 98% (was 70%), 23
	// requests waiting".
	Summary string `json:"summary"`
	// At is the change's time (Unix seconds); Detected says whether it
	// was found in the P95 series rather than given.
	At       float64 `json:"at"`
	Detected bool    `json:"detected"`
	Before   Window  `json:"before"`
	After    Window  `json:"after"`
	// P95 and Mean are the server's request time.
	P95  Change `json:"p95"`
	Mean Change `json:"mean"`
	// Phases, the one that grew most first.
	Phases []PhaseChange `json:"phases"`
	// Grew is the phase that grew most ("" when none did).
	Grew string `json:"grew"`
	// Outside is the time outside the server (probe minus server).
	Outside *PhaseChange `json:"outside,omitempty"`
	// Signals, ranked: moved ones first, by score.
	Signals []SignalChange `json:"signals"`
	// Missing lists what would make the answer complete.
	Missing []string `json:"missing"`
	// P95Series is the P95 over the lookback, as [t, v] points, for the
	// panel's sparkline.
	P95Series [][2]Num `json:"p95_series"`
}

// Explain compares the window before a change of the service's P95 with
// the window after. See the package doc for how the change is found.
func Explain(ctx context.Context, q Querier, spec Spec, o Options) (*Report, error) {
	o.defaults()
	r := &Report{Service: spec.Service, Phases: []PhaseChange{}, Signals: []SignalChange{}, Missing: slices.Clone(spec.Missing), P95Series: [][2]Num{}}
	if r.Missing == nil {
		r.Missing = []string{}
	}
	if len(spec.Phases) == 0 {
		r.Missing = append(r.Missing, "phase metrics: "+spec.Engine+" exports none for this service, so the time cannot be split into phases")
	}
	if spec.Total == nil {
		r.Status = StatusNoData
		r.Summary = "No request-time metric for " + spec.Service + " in storage: nothing to explain."
		return r, nil
	}
	// The end of the series is now to the millisecond (storage's
	// resolution), not to the second: a scrape that landed in the current
	// second is already in what a query at now shows, and the rise it
	// makes visible must be in the series too.
	now := o.Now.Truncate(time.Millisecond)
	from := now.Add(-o.Lookback)
	// The series a rise is looked for in: the P95, or the mean for
	// counters, which have no distribution.
	tpl, what := spec.Total.P95, "p95 series"
	if tpl == "" {
		tpl, what = spec.Total.Mean, "mean series"
	}
	ser, err := q.Range(ctx, fill(tpl, o.Rate), from, now, o.Step)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var pts []Point
	if len(ser) > 0 {
		for _, p := range ser[0].Points {
			if finite(p.V) {
				pts = append(pts, p)
			}
		}
	}
	for _, p := range pts {
		r.P95Series = append(r.P95Series, [2]Num{Num(unixSec(p.T)), Num(p.V)})
	}

	// sigAfter is the signals' after window: in a found rise, the last two
	// steps but none before half a step ahead of the first risen point
	// (the gauges at their level now, not averaged with the old one); the
	// after window where that holds too few samples.
	var before, after, sigAfter [2]time.Time
	// Given a time (an alert's start), the rise that led to it is looked
	// for in the series up to that time: an alert fires after its for:
	// duration, minutes after the latency rose.
	search := pts
	if !o.At.IsZero() {
		search = nil
		for _, p := range pts {
			if !p.T.After(o.At) {
				search = append(search, p)
			}
		}
	}
	k, found := findLatestRise(search)
	switch {
	case !o.At.IsZero() && !(found && o.At.Sub(search[k].T) <= 30*time.Minute):
		at := o.At.Truncate(time.Second)
		r.At, r.Status = unixSec(at), StatusRise
		before = [2]time.Time{at.Add(-o.Window), at}
		after = [2]time.Time{at, minTime(now, at.Add(o.Window))}
		if !after[1].After(after[0]) {
			after[1] = after[0].Add(o.Step)
		}
	default:
		if found {
			pts := search
			change := pts[k-1].T
			start := change.Add(-o.Step)
			r.At, r.Status, r.Detected = unixSec(pts[k].T), StatusRise, true
			after = [2]time.Time{start, now}
			sigAfter = [2]time.Time{maxTime(pts[k].T.Add(-o.Step/2), now.Add(-2*o.Step)), now}
			w := minDur(o.Window, max(o.Step, start.Sub(pts[0].T)))
			before = [2]time.Time{start.Add(-w), start}
		} else {
			r.Status = StatusSteady
			// The two halves of what is stored, at most 5 minutes each.
			w := minDur(o.Window/2, o.Lookback/2)
			if len(pts) > 0 {
				w = minDur(w, max(o.Step, now.Sub(pts[0].T)/2))
			}
			after = [2]time.Time{now.Add(-w), now}
			before = [2]time.Time{now.Add(-2 * w), now.Add(-w)}
			r.At = unixSec(after[0])
		}
	}
	if sigAfter[0].IsZero() || !sigAfter[1].After(sigAfter[0]) {
		sigAfter = after
	}
	r.Before = Window{unixSec(before[0]), unixSec(before[1])}
	r.After = Window{unixSec(after[0]), unixSec(after[1])}
	wb, wa := before[1].Sub(before[0]), after[1].Sub(after[0])

	pair := func(tpl string) (float64, float64, error) {
		b, err := scalar(ctx, q, fill(tpl, wb), before[1])
		if err != nil {
			return nan, nan, err
		}
		a, err := scalar(ctx, q, fill(tpl, wa), after[1])
		return b, a, err
	}
	mb, ma, err := pair(spec.Total.Mean)
	if err != nil {
		return nil, fmt.Errorf("mean: %w", err)
	}
	r.Mean = Change{Num(mb), Num(ma)}
	pb, pa := nan, nan
	if spec.Total.P95 != "" {
		if pb, pa, err = pair(spec.Total.P95); err != nil {
			return nil, fmt.Errorf("p95: %w", err)
		}
	}
	r.P95 = Change{Num(pb), Num(pa)}
	if r.Detected && finite(pb) && finite(pa) && pa < 1.1*pb {
		// A step in the P95 series that the windows' P95 does not show
		// (a short spike at the edge) is no rise to explain.
		r.Status, r.Detected = StatusSteady, false
	}
	if !finite(ma) && !finite(mb) && len(pts) == 0 {
		r.Status = StatusNoData
		r.Summary = "No requests of " + spec.Service + " recorded in the last " + o.Lookback.String() + ": nothing to explain."
		return r, nil
	}

	dTotal := ma - mb
	var phaseSum float64
	for _, ph := range spec.Phases {
		b, a, err := pair(ph.Mean)
		if err != nil {
			return nil, fmt.Errorf("phase %s: %w", ph.Name, err)
		}
		c := PhaseChange{Name: ph.Name, Before: Num(b), After: Num(a), Delta: Num(a - b), Share: Num(nan), P95Before: Num(nan), P95After: Num(nan)}
		if ph.P95 != "" {
			p1, p2, err := pair(ph.P95)
			if err != nil {
				return nil, fmt.Errorf("phase %s p95: %w", ph.Name, err)
			}
			c.P95Before, c.P95After = Num(p1), Num(p2)
		}
		if finite(a - b) {
			phaseSum += a - b
		}
		r.Phases = append(r.Phases, c)
	}
	if !finite(dTotal) {
		dTotal = phaseSum
	}
	for i := range r.Phases {
		if d := float64(r.Phases[i].Delta); finite(d) && dTotal > 0 {
			r.Phases[i].Share = Num(d / dTotal)
		}
	}
	sort.SliceStable(r.Phases, func(i, j int) bool { return less(r.Phases[j].Delta, r.Phases[i].Delta) })
	if len(r.Phases) > 0 && float64(r.Phases[0].Delta) > 0 && r.Status == StatusRise {
		r.Grew = r.Phases[0].Name
	}
	if spec.Probe != "" {
		b, a, err := pair(spec.Probe)
		if err != nil {
			return nil, fmt.Errorf("probe: %w", err)
		}
		ob, oa := math.Max(0, b-mb), math.Max(0, a-ma)
		c := PhaseChange{Name: "outside the server", Before: Num(ob), After: Num(oa), Delta: Num(oa - ob), Share: Num(nan), P95Before: Num(nan), P95After: Num(nan)}
		r.Outside = &c
	}

	link := func(expr string) string {
		span := after[1].Sub(before[0])
		v := url.Values{"expr": {expr}, "from": {fmt.Sprint(before[0].Add(-span / 4).UnixMilli())}, "to": {fmt.Sprint(after[1].Add(span / 4).UnixMilli())}}
		return "/explore?" + v.Encode()
	}
	for _, s := range spec.Signals {
		b, err := scalar(ctx, q, fill(s.Expr, wb), before[1])
		if err != nil {
			return nil, fmt.Errorf("signal %s: %w", s.ID, err)
		}
		a, err := scalar(ctx, q, fill(s.Expr, sigAfter[1].Sub(sigAfter[0])), sigAfter[1])
		if err == nil && !finite(a) && sigAfter != after {
			a, err = scalar(ctx, q, fill(s.Expr, wa), after[1])
		}
		if err != nil {
			return nil, fmt.Errorf("signal %s: %w", s.ID, err)
		}
		if !finite(b) && !finite(a) {
			continue
		}
		r.Signals = append(r.Signals, signalChange(s, b, a, link(s.Chart)))
	}
	if vc, ok, err := versionChange(ctx, q, spec, before, after); err != nil {
		return nil, fmt.Errorf("version: %w", err)
	} else if ok {
		vc.Link = link(strings.ReplaceAll(spec.Version, "[$__window]", "[5m]"))
		r.Signals = append(r.Signals, vc)
	}
	sort.SliceStable(r.Signals, func(i, j int) bool {
		a, b := r.Signals[i], r.Signals[j]
		if a.Moved != b.Moved {
			return a.Moved
		}
		return less(b.Score, a.Score)
	})
	r.Summary = summary(r, o)
	return r, nil
}

// less orders NaN last.
func less(a, b Num) bool {
	x, y := float64(a), float64(b)
	if !finite(x) {
		return false
	}
	if !finite(y) {
		return true
	}
	return x < y
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func minDur(a, b time.Duration) time.Duration { return max(min(a, b), time.Second) }

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// findLatestRise returns the most recent rise: after the largest one, a
// rise within its new level (a step up from a step up, two points after
// it or more) wins. The noise is the whole series'.
func findLatestRise(pts []Point) (int, bool) {
	sigma := noise(pts)
	k, ok := findRise(pts, 3, sigma)
	if !ok {
		return 0, false
	}
	for {
		k2, ok2 := findRise(pts[k:], 2, sigma)
		if !ok2 {
			return k, true
		}
		k += k2
	}
}

// noise estimates the series' noise from its successive differences:
// their median absolute value is 0.954·σ for white noise; at least 1 %
// of the mean.
func noise(pts []Point) float64 {
	if len(pts) < 2 {
		return 1e-9
	}
	diffs := make([]float64, 0, len(pts)-1)
	var sum float64
	for i, p := range pts {
		sum += p.V
		if i > 0 {
			diffs = append(diffs, math.Abs(p.V-pts[i-1].V))
		}
	}
	sort.Float64s(diffs)
	return math.Max(diffs[len(diffs)/2]/0.954, 0.01*math.Abs(sum/float64(len(pts)))+1e-9)
}

// findRise returns the index of the first point of the new level when the
// series rose: the split (minBefore points before it or more) maximising
// the difference of the means before and after, weighted by
// sqrt(nb·na/(nb+na)) and divided by the noise sigma; a rise needs a
// statistic of 3 and a level after of 1.2× the level before.
func findRise(pts []Point, minBefore int, sigma float64) (int, bool) {
	n := len(pts)
	if n < minBefore+1 {
		return 0, false
	}
	prefix := make([]float64, n+1)
	for i, p := range pts {
		prefix[i+1] = prefix[i] + p.V
	}
	best, bestScore := 0, 0.0
	for k := minBefore; k < n; k++ {
		nb, na := float64(k), float64(n-k)
		mb, ma := prefix[k]/nb, (prefix[n]-prefix[k])/na
		score := (ma - mb) * math.Sqrt(nb*na/(nb+na)) / sigma
		if score > bestScore {
			best, bestScore = k, score
		}
	}
	if best == 0 || bestScore < 3 {
		return 0, false
	}
	mb, ma := prefix[best]/float64(best), (prefix[n]-prefix[best])/float64(n-best)
	if !(ma >= 1.2*mb) {
		return 0, false
	}
	// The first point of the new level: walk back from the split while
	// the points are nearer the level after than the level before.
	k := best
	for k > minBefore && pts[k-1].V-mb > ma-pts[k-1].V {
		k--
	}
	return k, true
}

func signalChange(s Signal, b, a float64, link string) SignalChange {
	c := SignalChange{ID: s.ID, Title: s.Title, Unit: s.Unit, Before: Num(b), After: Num(a), Link: link, Panel: s.Panel, Score: Num(nan)}
	bv, av := b, a
	if !finite(bv) {
		bv = 0
	}
	if !finite(av) {
		av = 0
	}
	d := math.Abs(av - bv)
	floor := math.Max(s.Floor, 1e-12)
	c.Score = Num(d / math.Max(math.Abs(bv), floor))
	// A side without data is no evidence of a move.
	c.Moved = finite(b) && finite(a) && d >= s.Floor && d >= 0.2*math.Abs(bv)
	c.Text = signalText(s.Title, s.Unit, b, a)
	return c
}
