package slo

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"

	"github.com/aiserve/appliance/config"
)

// MinRequestsForP99 is the fewest requests in a week for which the report
// gives a P99: below it the 99th percentile rests on one or two requests,
// and the report says "n < 100" instead.
const MinRequestsForP99 = 100

// maxIncidents is how many incidents the report lists.
const maxIncidents = 5

// ReportOptions say what to report on and how.
type ReportOptions struct {
	SLOs []*config.SLOConfig
	// Location is the zone of the week; nil is UTC.
	Location *time.Location
	// Now is when the report is generated (printed in it; it decides which
	// figures come from the rollup tiers).
	Now time.Time
	// RawRetention is how long the raw tier keeps samples; data older
	// than Now − RawRetention is read from the 1m tier. Zero is 7 days.
	RawRetention time.Duration
	// ExternalURL is the appliance's URL, the only link in the report.
	ExternalURL string
	// Box names the appliance (its hostname) in the header.
	Box string
	// Notifications, when set, counts the notifications sent about the
	// alert between from and to (notify's delivery history); the
	// incidents then say how many went out.
	Notifications func(alert string, from, to time.Time) (int, error)
	// Releases, when set, lists the releases recorded in the week; the
	// report gives each latency SLO's P95 the day before and after.
	Releases ReleaseSource
}

// Report is the weekly report of one ISO week. Its JSON form is the
// report's JSON format.
type Report struct {
	Week        string    `json:"week"`
	Timezone    string    `json:"timezone"`
	Start       time.Time `json:"start"`
	End         time.Time `json:"end"`
	Hours       float64   `json:"hours"`
	LastWeek    string    `json:"last_week"`
	GeneratedAt time.Time `json:"generated_at"`
	Box         string    `json:"box,omitempty"`
	ExternalURL string    `json:"external_url,omitempty"`
	// Tiers read: "raw" for this week, "1m" where last week is older
	// than the raw tier keeps.
	Tiers     []string      `json:"tiers"`
	SLOs      []*SLOResult  `json:"slos"`
	Probes    []ProbeResult `json:"probes"`
	Incidents []Incident    `json:"incidents"`
	Restarts  []Restart     `json:"restarts"`
	Releases  []Release     `json:"releases"`
	Notes     []string      `json:"notes"`
}

// SLOResult is one SLO for one value of its by labels.
type SLOResult struct {
	Service   string            `json:"service"`
	SLO       string            `json:"slo"`
	Kind      string            `json:"kind"`
	Labels    map[string]string `json:"labels"`
	Objective float64           `json:"objective"`
	// Threshold in seconds (latency SLOs).
	Threshold float64 `json:"threshold,omitempty"`
	Window    string  `json:"window"`
	This      Period  `json:"this_week"`
	Last      Period  `json:"last_week"`
	// BudgetLeft is the share of the error budget of the SLO's window
	// ending with the week that is left (negative: overspent); nil
	// without traffic.
	BudgetLeft *float64 `json:"budget_left"`
	Met        *bool    `json:"met"`
	// Daily figures of this week and last, one per local day.
	Daily []Day `json:"daily"`
}

// Period is an SLO's figures over one week.
type Period struct {
	Good  float64 `json:"good"`
	Total float64 `json:"total"`
	// Attainment is Good/Total; nil without traffic.
	Attainment *float64 `json:"attainment"`
	// Latency quantiles (latency SLOs): P50, P95, P99.
	Quantiles []Quantile `json:"quantiles,omitempty"`
	// Buckets are the week's requests per bucket (latency SLOs), for the
	// distribution chart.
	Buckets []Bucket `json:"buckets,omitempty"`
	// Approx is set when the figures are approximate (rollups of a gauge).
	Approx bool   `json:"approx"`
	Tier   string `json:"tier"`
}

// Quantile is one latency quantile of a week.
type Quantile struct {
	Q float64 `json:"q"`
	// Value in seconds; nil when there were too few requests (TooFew) or
	// none.
	Value  *float64 `json:"value"`
	TooFew bool     `json:"too_few,omitempty"`
	// The bucket the quantile falls in: (Lower, Upper].
	Lower  string `json:"bucket_lower,omitempty"`
	Upper  string `json:"bucket_upper,omitempty"`
	Approx bool   `json:"approx"`
}

// Bucket is the number of requests in (previous bound, LE].
type Bucket struct {
	LE    string  `json:"le"`
	Count float64 `json:"count"`
}

// Day is one local day of the week.
type Day struct {
	Date           string   `json:"date"`
	P95            *float64 `json:"p95,omitempty"`
	LastP95        *float64 `json:"last_week_p95,omitempty"`
	Attainment     *float64 `json:"attainment"`
	LastAttainment *float64 `json:"last_week_attainment"`
}

// ProbeResult is one outside-in probe over the week and the week before.
type ProbeResult struct {
	Probe string      `json:"probe"`
	This  ProbePeriod `json:"this_week"`
	Last  ProbePeriod `json:"last_week"`
	// Failures this week by reason, most first.
	Failures []Failure `json:"failures"`
}

// ProbePeriod is a probe's figures over one week.
type ProbePeriod struct {
	Runs         float64  `json:"runs"`
	Availability *float64 `json:"availability"`
	// P95 of the probe's duration and, for LLM probes, of its time to
	// first token, in seconds.
	DurationP95 *float64 `json:"duration_p95"`
	TTFTP95     *float64 `json:"ttft_p95"`
	// Approx is set when the quantiles come from a rollup tier, where
	// they are computed over per-minute averages.
	Approx bool   `json:"approx"`
	Tier   string `json:"tier"`
}

// Failure is the number of failed runs with one reason.
type Failure struct {
	Reason string  `json:"reason"`
	Count  float64 `json:"count"`
}

// Incident is an alert that fired in the week.
type Incident struct {
	Alert     string            `json:"alert"`
	Severity  string            `json:"severity"`
	Labels    map[string]string `json:"labels"`
	Instances []string          `json:"instances"`
	Start     time.Time         `json:"start"`
	Duration  time.Duration     `json:"duration_ns"`
	// Notifications sent about it; nil when unknown.
	Notifications *int `json:"notifications"`
}

// Restart is an instance whose process started during the week.
type Restart struct {
	Instance string    `json:"instance"`
	Job      string    `json:"job"`
	At       time.Time `json:"at"`
}

// Compute computes the report of week w from src.
func Compute(ctx context.Context, src Source, w Week, opts ReportOptions) (*Report, error) {
	loc := opts.Location
	if loc == nil {
		loc = time.UTC
	}
	raw := opts.RawRetention
	if raw <= 0 {
		raw = 7 * 24 * time.Hour
	}
	start, end := w.Start(loc), w.End(loc)
	lw := w.Prev()
	lstart := lw.Start(loc)
	rawSince := opts.Now.Add(-raw)
	r := &Report{
		Week: w.String(), Timezone: loc.String(), Start: start, End: end, Hours: end.Sub(start).Hours(),
		LastWeek: lw.String(), GeneratedAt: opts.Now, Box: opts.Box, ExternalURL: opts.ExternalURL,
		SLOs: []*SLOResult{}, Probes: []ProbeResult{}, Incidents: []Incident{}, Restarts: []Restart{},
		Releases: []Release{},
	}
	// Tiers read, finest first: raw for what is younger than its
	// retention, 1m for the rest.
	if end.After(rawSince) {
		r.Tiers = append(r.Tiers, "raw")
	}
	if lstart.Before(rawSince) {
		r.Tiers = append(r.Tiers, "1m")
	}
	for _, s := range opts.SLOs {
		res, err := computeSLO(ctx, src, s, w, loc, rawSince)
		if err != nil {
			return nil, fmt.Errorf("slo %s: %w", s.Name, err)
		}
		r.SLOs = append(r.SLOs, res...)
	}
	slices.SortStableFunc(r.SLOs, func(a, b *SLOResult) int {
		return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(labelKey(a.Labels), labelKey(b.Labels)), cmp.Compare(a.SLO, b.SLO))
	})
	var err error
	if r.Probes, err = probes(ctx, src, w, loc, rawSince); err != nil {
		return nil, err
	}
	if r.Incidents, err = incidents(ctx, src, start, end); err != nil {
		return nil, err
	}
	if opts.Notifications != nil {
		for i := range r.Incidents {
			in := &r.Incidents[i]
			// Until a group interval or so after it resolved.
			n, err := opts.Notifications(in.Alert, in.Start, in.Start.Add(in.Duration+5*time.Minute))
			if err != nil {
				return nil, fmt.Errorf("count notifications: %w", err)
			}
			in.Notifications = &n
		}
	}
	if r.Restarts, err = restarts(ctx, src, start, end); err != nil {
		return nil, err
	}
	if r.Releases, err = releases(ctx, src, opts.Releases, opts.SLOs, start, end, opts.Now); err != nil {
		return nil, err
	}
	r.Notes = notes(r)
	return r, nil
}

func tierFor(t, rawSince time.Time) string {
	if t.Before(rawSince) {
		return "1m"
	}
	return "raw"
}

func labelKey(m map[string]string) string { return labels.FromMap(m).String() }

// weekly is the data of one SLO over one span, per by group.
type weekly struct {
	good, total map[string]float64
	buckets     map[string]promql.Buckets
	les         map[string]map[float64]string
	lbls        map[string]map[string]string
}

func byClause(s *config.SLOConfig, extra ...string) string {
	ls := append(slices.Clone(extra), s.By...)
	return "by (" + strings.Join(ls, ", ") + ")"
}

func selectorBody(sel string) string {
	return strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(sel), "{"), "}"))
}

func rangeOf(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) + "s" }

func evalAt(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

// spanData reads one SLO over [from, to).
func spanData(ctx context.Context, src Source, s *config.SLOConfig, from, to time.Time) (*weekly, error) {
	d := weekly{good: map[string]float64{}, total: map[string]float64{}, buckets: map[string]promql.Buckets{},
		les: map[string]map[float64]string{}, lbls: map[string]map[string]string{}}
	win, at := rangeOf(to.Sub(from)), evalAt(to)
	key := func(m map[string]string) string {
		g := map[string]string{}
		for _, l := range s.By {
			g[l] = m[l]
		}
		k := labelKey(g)
		d.lbls[k] = g
		return k
	}
	switch {
	case s.Kind == config.SLOKindLatency:
		sel := selectorBody(s.Selector)
		q := fmt.Sprintf("sum %s (increase(%s_bucket{%s}[%s] @ %s))", byClause(s, "le"), s.Histogram, sel, win, at)
		ss, err := src.Instant(ctx, q, to)
		if err != nil {
			return nil, err
		}
		for _, smp := range ss {
			k := key(smp.Labels)
			le, err := strconv.ParseFloat(smp.Labels[labels.BucketLabel], 64)
			if err != nil {
				continue
			}
			d.buckets[k] = append(d.buckets[k], promql.Bucket{UpperBound: le, Count: smp.Value})
			if d.les[k] == nil {
				d.les[k] = map[float64]string{}
			}
			d.les[k][le] = smp.Labels[labels.BucketLabel]
			if sameNumber(le, float64(s.Threshold)) {
				d.good[k] += smp.Value
			}
			if math.IsInf(le, 1) {
				d.total[k] += smp.Value
			}
		}
	case s.Probe != "":
		sel := fmt.Sprintf("probe_success{probe=%q}", s.Probe)
		for _, part := range []struct {
			f   string
			dst map[string]float64
		}{{"sum_over_time", d.good}, {"count_over_time", d.total}} {
			ss, err := src.Instant(ctx, fmt.Sprintf("sum %s (%s(%s[%s] @ %s))", byClause(s), part.f, sel, win, at), to)
			if err != nil {
				return nil, err
			}
			for _, smp := range ss {
				part.dst[key(smp.Labels)] += smp.Value
			}
		}
	default:
		for _, part := range []struct {
			expr string
			dst  map[string]float64
		}{{s.Good, d.good}, {s.Total, d.total}} {
			var inner string
			if strings.Contains(part.expr, "$window") {
				// An expression of rates over $window: its average rate
				// over the span times the span is the span's events.
				inner = fmt.Sprintf("(%s) * %d", strings.ReplaceAll(part.expr, "$window", win), int64(to.Sub(from)/time.Second))
			} else {
				inner = fmt.Sprintf("increase(%s[%s])", part.expr, win)
			}
			q := fmt.Sprintf("sum %s (%s)", byClause(s), strings.Replace(inner, "["+win+"]", "["+win+"] @ "+at, -1))
			ss, err := src.Instant(ctx, q, to)
			if err != nil {
				return nil, err
			}
			for _, smp := range ss {
				part.dst[key(smp.Labels)] += smp.Value
			}
		}
	}
	return &d, nil
}

func ratio(good, total float64) *float64 {
	if total <= 0 {
		return nil
	}
	v := good / total
	return &v
}

var reportQuantiles = []float64{0.5, 0.95, 0.99}

func quantiles(bs promql.Buckets, les map[float64]string, total float64, approx bool) []Quantile {
	var out []Quantile
	sorted := slices.Clone(bs)
	slices.SortFunc(sorted, func(a, b promql.Bucket) int { return cmp.Compare(a.UpperBound, b.UpperBound) })
	for _, q := range reportQuantiles {
		qu := Quantile{Q: q, Approx: approx}
		switch {
		case total <= 0:
		case q == 0.99 && total < MinRequestsForP99:
			qu.TooFew = true
		default:
			v, _, _, _, _, _ := promql.BucketQuantile(q, slices.Clone(sorted))
			if !math.IsNaN(v) {
				qu.Value = &v
				lower := "0"
				for _, b := range sorted {
					if b.UpperBound >= v {
						qu.Upper = les[b.UpperBound]
						break
					}
					lower = les[b.UpperBound]
				}
				qu.Lower = lower
			}
		}
		out = append(out, qu)
	}
	return out
}

// perBucket turns cumulative bucket counts into counts per bucket.
func perBucket(bs promql.Buckets, les map[float64]string) []Bucket {
	sorted := slices.Clone(bs)
	slices.SortFunc(sorted, func(a, b promql.Bucket) int { return cmp.Compare(a.UpperBound, b.UpperBound) })
	out := make([]Bucket, 0, len(sorted))
	prev := 0.0
	for _, b := range sorted {
		out = append(out, Bucket{LE: les[b.UpperBound], Count: math.Max(0, b.Count-prev)})
		prev = math.Max(prev, b.Count)
	}
	return out
}

func computeSLO(ctx context.Context, src Source, s *config.SLOConfig, w Week, loc *time.Location, rawSince time.Time) ([]*SLOResult, error) {
	lw := w.Prev()
	this, err := spanData(ctx, src, s, w.Start(loc), w.End(loc))
	if err != nil {
		return nil, err
	}
	last, err := spanData(ctx, src, s, lw.Start(loc), lw.End(loc))
	if err != nil {
		return nil, err
	}
	winEnd := w.End(loc)
	budget, err := spanData(ctx, src, s, winEnd.Add(-time.Duration(s.Window)), winEnd)
	if err != nil {
		return nil, err
	}
	days, lastDays := w.Days(loc), lw.Days(loc)
	var daily, lastDaily []*weekly
	for i := 0; i < 7; i++ {
		dd, err := spanData(ctx, src, s, days[i], days[i+1])
		if err != nil {
			return nil, err
		}
		ld, err := spanData(ctx, src, s, lastDays[i], lastDays[i+1])
		if err != nil {
			return nil, err
		}
		daily, lastDaily = append(daily, dd), append(lastDaily, ld)
	}

	keys := map[string]bool{}
	for k := range this.total {
		keys[k] = true
	}
	for k := range last.total {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	thisTier, lastTier := tierFor(w.Start(loc), rawSince), tierFor(lw.Start(loc), rawSince)
	// Quantiles over the probe gauges are not exact on rollups; bucket
	// counts are (the rollups keep counters' last values).
	latency := s.Kind == config.SLOKindLatency
	var out []*SLOResult
	for _, k := range sorted {
		lbls := this.lbls[k]
		if lbls == nil {
			lbls = last.lbls[k]
		}
		res := &SLOResult{
			Service: s.Service, SLO: s.Name, Kind: s.Kind, Labels: lbls, Objective: float64(s.Objective),
			Threshold: float64(s.Threshold), Window: Days(time.Duration(s.Window)),
			This: Period{Good: this.good[k], Total: this.total[k], Attainment: ratio(this.good[k], this.total[k]), Tier: thisTier},
			Last: Period{Good: last.good[k], Total: last.total[k], Attainment: ratio(last.good[k], last.total[k]), Tier: lastTier},
		}
		if latency {
			res.This.Quantiles = quantiles(this.buckets[k], this.les[k], this.total[k], false)
			res.Last.Quantiles = quantiles(last.buckets[k], last.les[k], last.total[k], false)
			res.This.Buckets = perBucket(this.buckets[k], this.les[k])
			res.Last.Buckets = perBucket(last.buckets[k], last.les[k])
		}
		if bt := budget.total[k]; bt > 0 {
			left := 1 - (bt-budget.good[k])/((1-float64(s.Objective))*bt)
			res.BudgetLeft = &left
		}
		if a := res.This.Attainment; a != nil {
			met := *a >= float64(s.Objective)
			res.Met = &met
		}
		for i := 0; i < 7; i++ {
			day := Day{Date: days[i].Format("2006-01-02"),
				Attainment:     ratio(daily[i].good[k], daily[i].total[k]),
				LastAttainment: ratio(lastDaily[i].good[k], lastDaily[i].total[k])}
			if latency {
				day.P95 = p95(daily[i], k)
				day.LastP95 = p95(lastDaily[i], k)
			}
			res.Daily = append(res.Daily, day)
		}
		out = append(out, res)
	}
	return out, nil
}

func p95(d *weekly, k string) *float64 {
	if d.total[k] <= 0 {
		return nil
	}
	v, _, _, _, _, _ := promql.BucketQuantile(0.95, slices.Clone(d.buckets[k]))
	if math.IsNaN(v) {
		return nil
	}
	return &v
}

// probes reads every probe's availability, P95 latencies and failures.
func probes(ctx context.Context, src Source, w Week, loc *time.Location, rawSince time.Time) ([]ProbeResult, error) {
	byProbe := map[string]*ProbeResult{}
	get := func(name string) *ProbeResult {
		p := byProbe[name]
		if p == nil {
			p = &ProbeResult{Probe: name, Failures: []Failure{}}
			byProbe[name] = p
		}
		return p
	}
	for i, wk := range []Week{w, w.Prev()} {
		from, to := wk.Start(loc), wk.End(loc)
		win, at := rangeOf(to.Sub(from)), evalAt(to)
		period := func(p *ProbeResult) *ProbePeriod {
			if i == 0 {
				return &p.This
			}
			return &p.Last
		}
		runs, err := src.Instant(ctx, fmt.Sprintf("sum by (probe) (count_over_time(probe_success[%s] @ %s))", win, at), to)
		if err != nil {
			return nil, err
		}
		ok, err := src.Instant(ctx, fmt.Sprintf("sum by (probe) (sum_over_time(probe_success[%s] @ %s))", win, at), to)
		if err != nil {
			return nil, err
		}
		for _, s := range runs {
			pp := period(get(s.Labels["probe"]))
			pp.Runs = s.Value
			pp.Tier = tierFor(from, rawSince)
			pp.Approx = from.Before(rawSince)
		}
		for _, s := range ok {
			pp := period(get(s.Labels["probe"]))
			pp.Availability = ratio(s.Value, pp.Runs)
		}
		for _, q := range []struct {
			metric string
			dst    func(*ProbePeriod) **float64
		}{
			{"probe_duration_seconds", func(pp *ProbePeriod) **float64 { return &pp.DurationP95 }},
			{"probe_ttft_seconds", func(pp *ProbePeriod) **float64 { return &pp.TTFTP95 }},
		} {
			ss, err := src.Instant(ctx, fmt.Sprintf("max by (probe) (quantile_over_time(0.95, %s[%s] @ %s))", q.metric, win, at), to)
			if err != nil {
				return nil, err
			}
			for _, s := range ss {
				if p, found := byProbe[s.Labels["probe"]]; found && !math.IsNaN(s.Value) {
					v := s.Value
					*q.dst(period(p)) = &v
				}
			}
		}
		if i == 0 {
			fs, err := src.Instant(ctx, fmt.Sprintf("sum by (probe, reason) (count_over_time(probe_success{reason!=\"\"}[%s] @ %s))", win, at), to)
			if err != nil {
				return nil, err
			}
			for _, s := range fs {
				if p, found := byProbe[s.Labels["probe"]]; found {
					p.Failures = append(p.Failures, Failure{Reason: s.Labels["reason"], Count: s.Value})
				}
			}
		}
	}
	out := make([]ProbeResult, 0, len(byProbe))
	for _, p := range byProbe {
		slices.SortFunc(p.Failures, func(a, b Failure) int { return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Reason, b.Reason)) })
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b ProbeResult) int { return cmp.Compare(a.Probe, b.Probe) })
	return out, nil
}

// incidents reads the alerts that fired in [start, end) from ALERTS, one
// interval per label set (gaps under two steps merged), clipped to the
// week, worst first. It counts samples per minute rather than reading
// ALERTS at each step: a plain selector would see an alert for the
// lookback delta (5m) after its last sample wherever no stale marker
// follows (imported or backfilled ALERTS).
func incidents(ctx context.Context, src Source, start, end time.Time) ([]Incident, error) {
	const step = time.Minute
	ss, err := src.Range(ctx, `count_over_time(ALERTS{alertstate="firing"}[1m])`, start.Add(step), end, step)
	if err != nil {
		return nil, err
	}
	type span struct {
		lbls       map[string]string
		start, end time.Time
	}
	var spans []span
	for _, ser := range ss {
		var cur *span
		for _, p := range ser.Points {
			if cur != nil && p.T.Sub(cur.end) <= 2*step {
				cur.end = p.T
				continue
			}
			if cur != nil {
				spans = append(spans, *cur)
			}
			cur = &span{lbls: ser.Labels, start: p.T, end: p.T}
		}
		if cur != nil {
			spans = append(spans, *cur)
		}
	}
	// One incident per alert name, severity and group labels other than
	// instance; its instances are listed.
	byKey := map[string]*Incident{}
	var order []string
	for _, sp := range spans {
		g := map[string]string{}
		for k, v := range sp.lbls {
			if k != "instance" && k != "alertstate" && k != labels.MetricName {
				g[k] = v
			}
		}
		k := labelKey(g) + sp.start.String()
		inc, ok := byKey[k]
		if !ok {
			inc = &Incident{Alert: g[labels.AlertName], Severity: g["severity"], Labels: g, Start: sp.start, Instances: []string{}}
			byKey[k] = inc
			order = append(order, k)
		}
		if in := sp.lbls["instance"]; in != "" && !slices.Contains(inc.Instances, in) {
			inc.Instances = append(inc.Instances, in)
		}
		inc.Duration = max(inc.Duration, sp.end.Sub(sp.start)+step)
	}
	out := make([]Incident, 0, len(order))
	for _, k := range order {
		inc := byKey[k]
		slices.Sort(inc.Instances)
		delete(inc.Labels, labels.AlertName)
		out = append(out, *inc)
	}
	slices.SortStableFunc(out, func(a, b Incident) int {
		return cmp.Or(cmp.Compare(a.Severity, b.Severity), cmp.Compare(b.Duration, a.Duration), a.Start.Compare(b.Start), cmp.Compare(a.Alert, b.Alert))
	})
	if len(out) > maxIncidents {
		out = out[:maxIncidents]
	}
	return out, nil
}

// restarts lists instances whose process started during the week.
func restarts(ctx context.Context, src Source, start, end time.Time) ([]Restart, error) {
	ss, err := src.Instant(ctx, fmt.Sprintf("max by (job, instance) (max_over_time(process_start_time_seconds[%s] @ %s)) >= %s",
		rangeOf(end.Sub(start)), evalAt(end), evalAt(start)), end)
	if err != nil {
		return nil, err
	}
	out := []Restart{}
	for _, s := range ss {
		at := time.Unix(int64(s.Value), 0).In(start.Location())
		if at.Before(end) {
			out = append(out, Restart{Instance: s.Labels["instance"], Job: s.Labels["job"], At: at})
		}
	}
	slices.SortFunc(out, func(a, b Restart) int { return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Instance, b.Instance)) })
	return out, nil
}

func notes(r *Report) []string {
	n := []string{
		"Attainment is good/total requests over the week; quantiles interpolate linearly within the bucket they fall in, as histogram_quantile does.",
		fmt.Sprintf("P99 is given from %d requests in the week; below that the report says n < %d.", MinRequestsForP99, MinRequestsForP99),
	}
	if slices.Contains(r.Tiers, "1m") {
		n = append(n, "What is older than the raw tier keeps is read from the 1m tier: counters and histogram buckets are exact there; probe latency quantiles, marked ≈, are computed over per-minute averages.")
	}
	if len(r.Releases) > 0 {
		n = append(n, "A release's P95 before and after is over the day before it and the day after (to the report's time at most), for the release's target and model where it names them.")
	}
	if r.Hours != 168 {
		n = append(n, fmt.Sprintf("This week is %s hours long in %s (daylight saving time).", strconv.FormatFloat(r.Hours, 'f', -1, 64), r.Timezone))
	}
	return n
}
