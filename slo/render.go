package slo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// RenderJSON writes the report as indented JSON with a final newline.
func RenderJSON(r *Report) ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode report: %w", err)
	}
	return append(b, '\n'), nil
}

// view is what the Markdown and HTML templates print: the report with
// every number formatted.
type view struct {
	R         *Report
	Title     string
	Period    string
	Generated string
	Link      string
	Rows      []sloRow
	Probes    []probeRow
	Incidents []incidentRow
	Restarts  []restartRow
	Releases  []releaseRow
}

type probeRow struct {
	Probe, Avail, LastAvail, Delta, Dur, LastDur, TTFT, LastTTFT, Failures string
}

type sloRow struct {
	Service, SLO, Target, Objective        string
	This, Last, Delta, Budget, Met, Window string
	Good, Total, LastGood, LastTotal       string
	Quantiles                              []quantRow
	Daily                                  []dayRow
	DailyChart, DistChart                  template.HTML
	BudgetBar                              template.HTML
	budgetLeft                             float64
	HasLatency, Failing                    bool
}

type quantRow struct {
	Name, This, Last, Change, Bucket string
}

type dayRow struct {
	Date, P95, LastP95, Attainment, LastAttainment string
}

type incidentRow struct {
	Alert, Severity, Instances, Start, Duration, Labels, Notified string
}

type restartRow struct {
	Instance, Job, At string
}

type releaseRow struct {
	At, Text, Labels string
	Latency          []releaseLatencyRow
}

type releaseLatencyRow struct {
	SLO, Target, Before, After, Change string
}

func newView(r *Report) *view {
	loc := r.Start.Location()
	v := &view{
		R:         r,
		Title:     fmt.Sprintf("SLO report %s", r.Week),
		Period:    fmt.Sprintf("%s – %s (%s, %s h)", r.Start.Format("Mon 2006-01-02 15:04"), r.End.Format("Mon 2006-01-02 15:04"), r.Timezone, strconv.FormatFloat(r.Hours, 'f', -1, 64)),
		Generated: r.GeneratedAt.In(loc).Format("2006-01-02 15:04 MST"),
	}
	if r.ExternalURL != "" {
		v.Link = strings.TrimRight(r.ExternalURL, "/") + "/reports/" + r.Week + ".html"
	}
	for _, s := range r.SLOs {
		row := sloRow{
			Service: s.Service, SLO: s.SLO, Target: target(s), Objective: fmtObjective(s.Objective), Window: s.Window,
			This: approx(fmtPct(s.This.Attainment), s.This.Approx), Last: approx(fmtPct(s.Last.Attainment), s.Last.Approx),
			Delta: fmtPP(s.This.Attainment, s.Last.Attainment), Budget: fmtPct(s.BudgetLeft),
			Good: fmtCount(s.This.Good), Total: fmtCount(s.This.Total), LastGood: fmtCount(s.Last.Good), LastTotal: fmtCount(s.Last.Total),
			HasLatency: len(s.This.Quantiles) > 0 || len(s.Last.Quantiles) > 0,
		}
		switch {
		case s.Met == nil:
			row.Met = "no traffic"
		case *s.Met:
			row.Met = "met"
		default:
			row.Met, row.Failing = "missed", true
		}
		if s.BudgetLeft != nil {
			row.budgetLeft = *s.BudgetLeft
		}
		row.BudgetBar = budgetBar(s.BudgetLeft)
		for i, q := range s.This.Quantiles {
			var last Quantile
			if i < len(s.Last.Quantiles) {
				last = s.Last.Quantiles[i]
			}
			qr := quantRow{Name: "P" + strconv.FormatFloat(q.Q*100, 'f', -1, 64), This: fmtQuantile(q), Last: fmtQuantile(last), Change: fmtChange(q.Value, last.Value)}
			if q.Value != nil && q.Upper != "" {
				qr.Bucket = fmtLE(q.Lower) + "–" + fmtLE(q.Upper)
			}
			row.Quantiles = append(row.Quantiles, qr)
		}
		for _, d := range s.Daily {
			dr := dayRow{Date: d.Date, Attainment: fmtPct(d.Attainment), LastAttainment: fmtPct(d.LastAttainment), P95: "–", LastP95: "–"}
			if d.P95 != nil {
				dr.P95 = fmtSeconds(*d.P95)
			}
			if d.LastP95 != nil {
				dr.LastP95 = fmtSeconds(*d.LastP95)
			}
			row.Daily = append(row.Daily, dr)
		}
		if row.HasLatency {
			row.DailyChart = dailyChart(s)
			row.DistChart = distChart(s)
		}
		v.Rows = append(v.Rows, row)
	}
	for _, p := range r.Probes {
		sec := func(v *float64, approxed bool) string {
			if v == nil {
				return "–"
			}
			return approx(fmtSeconds(*v), approxed)
		}
		var fs []string
		for _, f := range p.Failures {
			fs = append(fs, f.Reason+" "+fmtCount(f.Count))
		}
		v.Probes = append(v.Probes, probeRow{
			Probe: p.Probe, Avail: fmtPct(p.This.Availability), LastAvail: fmtPct(p.Last.Availability), Delta: fmtPP(p.This.Availability, p.Last.Availability),
			Dur: sec(p.This.DurationP95, p.This.Approx), LastDur: sec(p.Last.DurationP95, p.Last.Approx),
			TTFT: sec(p.This.TTFTP95, p.This.Approx), LastTTFT: sec(p.Last.TTFTP95, p.Last.Approx), Failures: strings.Join(fs, ", "),
		})
	}
	for _, in := range r.Incidents {
		var ls []string
		for k, val := range in.Labels {
			if k != "severity" {
				ls = append(ls, k+"="+val)
			}
		}
		slices.Sort(ls)
		v.Incidents = append(v.Incidents, incidentRow{
			Alert: in.Alert, Severity: in.Severity, Instances: strings.Join(in.Instances, ", "),
			Start: in.Start.In(loc).Format("Mon 01-02 15:04"), Duration: fmtDuration(in.Duration), Labels: strings.Join(ls, ", "),
			Notified: "–",
		})
		if in.Notifications != nil {
			v.Incidents[len(v.Incidents)-1].Notified = strconv.Itoa(*in.Notifications)
		}
	}
	for _, rs := range r.Restarts {
		v.Restarts = append(v.Restarts, restartRow{Instance: rs.Instance, Job: rs.Job, At: rs.At.In(loc).Format("Mon 01-02 15:04")})
	}
	for _, rl := range r.Releases {
		row := releaseRow{At: rl.At.In(loc).Format("Mon 01-02 15:04"), Text: rl.Text, Labels: fmtReleaseLabels(rl.Labels)}
		for _, l := range rl.Latency {
			lr := releaseLatencyRow{SLO: l.SLO, Target: fmtReleaseLabels(l.Labels), Before: "–", After: "–", Change: fmtChange(l.After, l.Before)}
			if l.Before != nil {
				lr.Before = fmtSeconds(*l.Before)
			}
			if l.After != nil {
				lr.After = fmtSeconds(*l.After)
			}
			row.Latency = append(row.Latency, lr)
		}
		v.Releases = append(v.Releases, row)
	}
	return v
}

func target(s *SLOResult) string {
	var ls []string
	for k, v := range s.Labels {
		ls = append(ls, k+"="+v)
	}
	slices.Sort(ls)
	return strings.Join(ls, ", ")
}

func fmtQuantile(q Quantile) string {
	switch {
	case q.TooFew:
		return fmt.Sprintf("n < %d", MinRequestsForP99)
	case q.Value == nil:
		return "–"
	}
	return approx(fmtSeconds(*q.Value), q.Approx)
}

// RenderMarkdown writes the report as Markdown: the text part of the
// email and the message for chat receivers.
func RenderMarkdown(r *Report) ([]byte, error) {
	var b bytes.Buffer
	v := newView(r)
	fmt.Fprintf(&b, "# %s\n\n%s  \nGenerated %s", v.Title, v.Period, v.Generated)
	if r.Box != "" {
		fmt.Fprintf(&b, " on %s", r.Box)
	}
	fmt.Fprintf(&b, "; tiers read: %s.\n\n", strings.Join(r.Tiers, ", "))
	b.WriteString("## SLOs\n\n")
	if len(v.Rows) == 0 {
		b.WriteString("No SLO had data this week or last.\n\n")
	} else {
		b.WriteString("| Service | SLO | Labels | Objective | This week | Last week | Δ | Budget left | |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, row := range v.Rows {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", mdCell(row.Service), mdCell(row.SLO), mdCell(row.Target),
				row.Objective, row.This, row.Last, row.Delta, row.Budget, row.Met)
		}
		b.WriteString("\n")
	}
	for _, row := range v.Rows {
		if !row.HasLatency {
			continue
		}
		fmt.Fprintf(&b, "### %s %s\n\n", mdCell(row.SLO), mdCell(row.Target))
		fmt.Fprintf(&b, "%s of %s requests good this week, %s of %s last week.\n\n", row.Good, row.Total, row.LastGood, row.LastTotal)
		b.WriteString("| | This week | Last week | Change | Bucket |\n|---|---|---|---|---|\n")
		for _, q := range row.Quantiles {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", q.Name, q.This, q.Last, q.Change, q.Bucket)
		}
		b.WriteString("\n")
	}
	if len(v.Probes) > 0 {
		b.WriteString("## Probes\n\n| Probe | Availability | Last week | Δ | P95 duration | Last week | P95 TTFT | Last week | Failures |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, p := range v.Probes {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", mdCell(p.Probe), p.Avail, p.LastAvail, p.Delta, p.Dur, p.LastDur, p.TTFT, p.LastTTFT, mdCell(p.Failures))
		}
		b.WriteString("\n")
	}
	b.WriteString("## Top incidents\n\n")
	if len(v.Incidents) == 0 {
		b.WriteString("No alert fired this week.\n")
	}
	for i, in := range v.Incidents {
		if i == 3 {
			break
		}
		fmt.Fprintf(&b, "%d. **%s** %s, %s for %s", i+1, in.Severity, mdCell(in.Alert), in.Start, in.Duration)
		if in.Instances != "" {
			fmt.Fprintf(&b, " on %s", mdCell(in.Instances))
		}
		switch in.Notified {
		case "–":
		case "1":
			b.WriteString(", 1 notification")
		default:
			fmt.Fprintf(&b, ", %s notifications", in.Notified)
		}
		b.WriteString("\n")
	}
	if len(v.Releases) > 0 {
		b.WriteString("\n## Releases\n\n")
		for _, rl := range v.Releases {
			fmt.Fprintf(&b, "- %s: %s", rl.At, mdCell(rl.Text))
			for _, l := range rl.Latency {
				fmt.Fprintf(&b, "; %s", l.SLO)
				if l.Target != "" {
					fmt.Fprintf(&b, " (%s)", mdCell(l.Target))
				}
				fmt.Fprintf(&b, " P95 %s → %s (%s)", l.Before, l.After, l.Change)
			}
			b.WriteString("\n")
		}
	}
	if len(v.Restarts) > 0 {
		b.WriteString("\n## Restarts\n\n")
		for _, rs := range v.Restarts {
			fmt.Fprintf(&b, "- %s (%s) at %s\n", mdCell(rs.Instance), mdCell(rs.Job), rs.At)
		}
	}
	if v.Link != "" {
		fmt.Fprintf(&b, "\nFull report: %s\n", v.Link)
	}
	return b.Bytes(), nil
}

func mdCell(s string) string {
	// Only what breaks a table: chat receivers' Markdown subsets print
	// other escapes literally.
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// RenderHTML writes the report as one self-contained HTML page: inline CSS
// and SVG, no script, and no reference outside it except links to
// ExternalURL.
func RenderHTML(r *Report) ([]byte, error) {
	var b bytes.Buffer
	if err := htmlTemplate.Execute(&b, newView(r)); err != nil {
		return nil, fmt.Errorf("render report: %w", err)
	}
	return b.Bytes(), nil
}

func budgetBar(left *float64) template.HTML {
	if left == nil {
		return ""
	}
	w := math.Max(0, math.Min(1, *left)) * 100
	color := "#2e7d32"
	switch {
	case *left < 0.25:
		color = "#c62828"
	case *left < 0.5:
		color = "#ef6c00"
	}
	return template.HTML(fmt.Sprintf(`<span class="bar"><span style="width:%s%%;background:%s"></span></span>`, strconv.FormatFloat(round(w, 1), 'f', 1, 64), color))
}

const chartW, chartH, chartPad = 420.0, 140.0, 28.0

func svgNum(v float64) string { return strconv.FormatFloat(round(v, 1), 'f', 1, 64) }

// dailyChart draws the daily P95 of this week against last week's.
func dailyChart(s *SLOResult) template.HTML {
	top := 0.0
	for _, d := range s.Daily {
		for _, p := range []*float64{d.P95, d.LastP95} {
			if p != nil {
				top = math.Max(top, *p)
			}
		}
	}
	if top == 0 {
		return ""
	}
	top *= 1.15
	x := func(i int) float64 { return chartPad + float64(i)*(chartW-2*chartPad)/6 }
	y := func(v float64) float64 { return chartH - chartPad - v/top*(chartH-2*chartPad) }
	line := func(get func(Day) *float64, color, dash string) string {
		var pts []string
		for i, d := range s.Daily {
			if p := get(d); p != nil {
				pts = append(pts, svgNum(x(i))+","+svgNum(y(*p)))
			}
		}
		if len(pts) == 0 {
			return ""
		}
		return fmt.Sprintf(`<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`, color, dash, strings.Join(pts, " "))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg width="%s" height="%s" viewBox="0 0 %s %s" role="img" aria-label="daily P95">`, svgNum(chartW), svgNum(chartH), svgNum(chartW), svgNum(chartH))
	fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#999"/>`, svgNum(chartPad), svgNum(chartH-chartPad), svgNum(chartW-chartPad), svgNum(chartH-chartPad))
	if s.Threshold > 0 && s.Threshold < top {
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#c62828" stroke-dasharray="2 3"/><text x="%s" y="%s" font-size="10" fill="#c62828">%s</text>`,
			svgNum(chartPad), svgNum(y(s.Threshold)), svgNum(chartW-chartPad), svgNum(y(s.Threshold)), svgNum(chartW-chartPad+2), svgNum(y(s.Threshold)+3), template.HTMLEscapeString(fmtSeconds(s.Threshold)))
	}
	b.WriteString(line(func(d Day) *float64 { return d.LastP95 }, "#9e9e9e", ` stroke-dasharray="4 3"`))
	b.WriteString(line(func(d Day) *float64 { return d.P95 }, "#1565c0", ""))
	for i, d := range s.Daily {
		t, _ := time.Parse("2006-01-02", d.Date)
		fmt.Fprintf(&b, `<text x="%s" y="%s" font-size="10" text-anchor="middle" fill="#555">%s</text>`, svgNum(x(i)), svgNum(chartH-chartPad+14), t.Format("Mon"))
	}
	fmt.Fprintf(&b, `<text x="4" y="12" font-size="10" fill="#555">P95, max %s</text></svg>`, template.HTMLEscapeString(fmtSeconds(top/1.15)))
	return template.HTML(b.String())
}

// distChart draws the share of requests per bucket, this week against
// last.
func distChart(s *SLOResult) template.HTML {
	n := max(len(s.This.Buckets), len(s.Last.Buckets))
	if n == 0 || (s.This.Total <= 0 && s.Last.Total <= 0) {
		return ""
	}
	share := func(bs []Bucket, i int, total float64) float64 {
		if i >= len(bs) || total <= 0 {
			return 0
		}
		return bs[i].Count / total
	}
	top := 0.0
	for i := 0; i < n; i++ {
		top = math.Max(top, math.Max(share(s.This.Buckets, i, s.This.Total), share(s.Last.Buckets, i, s.Last.Total)))
	}
	if top == 0 {
		return ""
	}
	bw := (chartW - 2*chartPad) / float64(n)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg width="%s" height="%s" viewBox="0 0 %s %s" role="img" aria-label="latency distribution">`, svgNum(chartW), svgNum(chartH), svgNum(chartW), svgNum(chartH))
	for i := 0; i < n; i++ {
		x0 := chartPad + float64(i)*bw
		for j, bar := range []struct {
			v     float64
			color string
		}{{share(s.Last.Buckets, i, s.Last.Total), "#bdbdbd"}, {share(s.This.Buckets, i, s.This.Total), "#1565c0"}} {
			h := bar.v / top * (chartH - 2*chartPad)
			fmt.Fprintf(&b, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s"/>`, svgNum(x0+float64(j)*bw/2), svgNum(chartH-chartPad-h), svgNum(math.Max(bw/2-1, 0.5)), svgNum(h), bar.color)
		}
		var le string
		if i < len(s.This.Buckets) {
			le = s.This.Buckets[i].LE
		} else {
			le = s.Last.Buckets[i].LE
		}
		if n <= 12 || i%2 == 0 {
			fmt.Fprintf(&b, `<text x="%s" y="%s" font-size="9" text-anchor="middle" fill="#555">%s</text>`, svgNum(x0+bw/2), svgNum(chartH-chartPad+12), template.HTMLEscapeString(fmtLE(le)))
		}
	}
	b.WriteString(`<text x="4" y="12" font-size="10" fill="#555">requests per bucket (blue: this week, grey: last week)</text></svg>`)
	return template.HTML(b.String())
}

var htmlTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body{font:14px/1.45 -apple-system,"Segoe UI",Roboto,"Noto Sans","PingFang SC","Microsoft YaHei",sans-serif;color:#212121;margin:24px;max-width:980px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #e0e0e0}h3{font-size:15px;margin:20px 0 6px}
table{border-collapse:collapse;margin:6px 0 12px}th,td{padding:4px 10px;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
th{background:#fafafa;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
.meta{color:#616161}.missed{color:#c62828;font-weight:600}.met{color:#2e7d32}
.bar{display:inline-block;width:80px;height:8px;background:#eee;margin-left:6px;vertical-align:middle}.bar span{display:block;height:8px}
.charts{display:flex;flex-wrap:wrap;gap:12px}.notes{color:#616161;font-size:12px}
</style></head><body>
<h1>{{.Title}}</h1>
<div class="meta">{{.Period}}<br>Generated {{.Generated}}{{with .R.Box}} on {{.}}{{end}}; tiers read: {{range $i, $t := .R.Tiers}}{{if $i}}, {{end}}{{$t}}{{end}}{{with .Link}} · <a href="{{.}}">online</a>{{end}}</div>
<h2>SLOs</h2>
{{if .Rows}}<table><tr><th>Service</th><th>SLO</th><th>Labels</th><th>Objective</th><th>Window</th><th>This week</th><th>Last week</th><th>Δ</th><th>Budget left</th><th></th></tr>
{{range .Rows}}<tr><td>{{.Service}}</td><td>{{.SLO}}</td><td>{{.Target}}</td><td class="n">{{.Objective}}</td><td>{{.Window}}</td><td class="n">{{.This}}</td><td class="n">{{.Last}}</td><td class="n">{{.Delta}}</td><td class="n">{{.Budget}}{{.BudgetBar}}</td><td class="{{if .Failing}}missed{{else}}met{{end}}">{{.Met}}</td></tr>
{{end}}</table>{{else}}<p>No SLO had data this week or last.</p>{{end}}
{{range .Rows}}{{if .HasLatency}}<h3>{{.SLO}}{{with .Target}} · {{.}}{{end}}</h3>
<p>{{.Good}} of {{.Total}} requests good this week, {{.LastGood}} of {{.LastTotal}} last week.</p>
<table><tr><th></th><th>This week</th><th>Last week</th><th>Change</th><th>Bucket</th></tr>
{{range .Quantiles}}<tr><td>{{.Name}}</td><td class="n">{{.This}}</td><td class="n">{{.Last}}</td><td class="n">{{.Change}}</td><td>{{.Bucket}}</td></tr>
{{end}}</table>
<div class="charts">{{.DailyChart}}{{.DistChart}}</div>
<table><tr><th>Day</th><th>P95</th><th>Last week</th><th>Attainment</th><th>Last week</th></tr>
{{range .Daily}}<tr><td>{{.Date}}</td><td class="n">{{.P95}}</td><td class="n">{{.LastP95}}</td><td class="n">{{.Attainment}}</td><td class="n">{{.LastAttainment}}</td></tr>
{{end}}</table>
{{end}}{{end}}
{{if .Probes}}<h2>Probes</h2>
<table><tr><th>Probe</th><th>Availability</th><th>Last week</th><th>Δ</th><th>P95 duration</th><th>Last week</th><th>P95 TTFT</th><th>Last week</th><th>Failures</th></tr>
{{range .Probes}}<tr><td>{{.Probe}}</td><td class="n">{{.Avail}}</td><td class="n">{{.LastAvail}}</td><td class="n">{{.Delta}}</td><td class="n">{{.Dur}}</td><td class="n">{{.LastDur}}</td><td class="n">{{.TTFT}}</td><td class="n">{{.LastTTFT}}</td><td>{{.Failures}}</td></tr>
{{end}}</table>{{end}}
<h2>Top incidents</h2>
{{if .Incidents}}<table><tr><th>Severity</th><th>Alert</th><th>Labels</th><th>Instances</th><th>Start</th><th>Duration</th><th>Notifications</th></tr>
{{range .Incidents}}<tr><td>{{.Severity}}</td><td>{{.Alert}}</td><td>{{.Labels}}</td><td>{{.Instances}}</td><td>{{.Start}}</td><td class="n">{{.Duration}}</td><td class="n">{{.Notified}}</td></tr>
{{end}}</table>{{else}}<p>No alert fired this week.</p>{{end}}
<h2>Releases</h2>
{{if .Releases}}<table><tr><th>Released</th><th>Release</th><th>Labels</th><th>SLO</th><th>P95 the day before</th><th>P95 the day after</th><th>Change</th></tr>
{{range .Releases}}{{$r := .}}{{range $i, $l := .Latency}}<tr>{{if eq $i 0}}<td>{{$r.At}}</td><td>{{$r.Text}}</td><td>{{$r.Labels}}</td>{{else}}<td></td><td></td><td></td>{{end}}<td>{{$l.SLO}}{{with $l.Target}} · {{.}}{{end}}</td><td class="n">{{$l.Before}}</td><td class="n">{{$l.After}}</td><td class="n">{{$l.Change}}</td></tr>
{{else}}<tr><td>{{$r.At}}</td><td>{{$r.Text}}</td><td>{{$r.Labels}}</td><td colspan="4">no latency SLO traffic around it</td></tr>
{{end}}{{end}}</table>{{else}}<p>No release recorded this week.</p>{{end}}
<h2>Restarts</h2>
{{if .Restarts}}<table><tr><th>Instance</th><th>Job</th><th>Started</th></tr>
{{range .Restarts}}<tr><td>{{.Instance}}</td><td>{{.Job}}</td><td>{{.At}}</td></tr>
{{end}}</table>{{else}}<p>No restart this week.</p>{{end}}
<h2>Method</h2>
<ul class="notes">{{range .R.Notes}}<li>{{.}}</li>{{end}}</ul>
</body></html>
`))
