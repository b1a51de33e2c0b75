package slo

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"strconv"
)

// RenderEmailHTML writes the report as HTML that mail clients render:
// tables with inline styles and bars made of table cells, no stylesheet,
// no SVG (Outlook and others drop it) and no images, well under Gmail's
// 102 KB clipping limit. The Markdown rendering is the mail's text part.
func RenderEmailHTML(r *Report) ([]byte, error) {
	v := newView(r)
	type bar struct {
		Label, Value string
		Width        int
	}
	type emailRow struct {
		sloRow
		Bars []bar
	}
	var rows []emailRow
	for i, row := range v.Rows {
		er := emailRow{sloRow: row}
		s := r.SLOs[i]
		top := 0.0
		for _, d := range s.Daily {
			if d.P95 != nil {
				top = math.Max(top, *d.P95)
			}
		}
		for j, d := range s.Daily {
			if d.P95 == nil || top == 0 {
				continue
			}
			er.Bars = append(er.Bars, bar{Label: row.Daily[j].Date, Value: row.Daily[j].P95, Width: max(1, int(math.Round(*d.P95/top*200)))})
		}
		rows = append(rows, er)
	}
	var b bytes.Buffer
	err := emailTemplate.Execute(&b, struct {
		*view
		Email []emailRow
	}{v, rows})
	if err != nil {
		return nil, fmt.Errorf("render report email: %w", err)
	}
	return b.Bytes(), nil
}

var emailTemplate = template.Must(template.New("email").Funcs(template.FuncMap{"itoa": strconv.Itoa}).Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{{.Title}}</title></head>
<body style="margin:0;padding:16px;font-family:Arial,Helvetica,sans-serif;font-size:14px;color:#212121">
<h1 style="font-size:20px;margin:0 0 4px">{{.Title}}</h1>
<p style="color:#616161;margin:0 0 16px">{{.Period}}<br>Generated {{.Generated}}{{with .R.Box}} on {{.}}{{end}}{{with .Link}} · <a href="{{.}}" style="color:#1565c0">full report</a>{{end}}</p>
<table cellpadding="4" cellspacing="0" border="0" style="border-collapse:collapse">
<tr style="background:#fafafa"><th align="left">Service</th><th align="left">SLO</th><th align="left">Labels</th><th align="right">Objective</th><th align="right">This week</th><th align="right">Last week</th><th align="right">Δ</th><th align="right">Budget left</th><th></th></tr>
{{range .Rows}}<tr style="border-bottom:1px solid #eeeeee"><td>{{.Service}}</td><td>{{.SLO}}</td><td>{{.Target}}</td><td align="right">{{.Objective}}</td><td align="right">{{.This}}</td><td align="right">{{.Last}}</td><td align="right">{{.Delta}}</td><td align="right">{{.Budget}}</td><td style="color:{{if .Failing}}#c62828{{else}}#2e7d32{{end}}">{{.Met}}</td></tr>
{{end}}</table>
{{range .Email}}{{if .HasLatency}}<h2 style="font-size:16px;margin:20px 0 6px">{{.SLO}}{{with .Target}} · {{.}}{{end}}</h2>
<table cellpadding="4" cellspacing="0" border="0" style="border-collapse:collapse">
<tr style="background:#fafafa"><th></th><th align="right">This week</th><th align="right">Last week</th><th align="right">Change</th><th align="left">Bucket</th></tr>
{{range .Quantiles}}<tr><td>{{.Name}}</td><td align="right">{{.This}}</td><td align="right">{{.Last}}</td><td align="right">{{.Change}}</td><td>{{.Bucket}}</td></tr>
{{end}}</table>
{{if .Bars}}<p style="margin:8px 0 4px;color:#616161">Daily P95</p>
<table cellpadding="0" cellspacing="2" border="0">
{{range .Bars}}<tr><td style="font-size:12px;color:#616161;padding-right:6px">{{.Label}}</td><td><table cellpadding="0" cellspacing="0" border="0"><tr><td width="{{itoa .Width}}" height="10" style="background:#1565c0;font-size:1px;line-height:1px">&nbsp;</td></tr></table></td><td style="font-size:12px;padding-left:6px">{{.Value}}</td></tr>
{{end}}</table>{{end}}
{{end}}{{end}}
{{if .Probes}}<h2 style="font-size:16px;margin:20px 0 6px">Probes</h2>
<table cellpadding="4" cellspacing="0" border="0" style="border-collapse:collapse">
<tr style="background:#fafafa"><th align="left">Probe</th><th align="right">Availability</th><th align="right">Last week</th><th align="right">P95 duration</th><th align="right">Last week</th><th align="left">Failures</th></tr>
{{range .Probes}}<tr><td>{{.Probe}}</td><td align="right">{{.Avail}}</td><td align="right">{{.LastAvail}}</td><td align="right">{{.Dur}}</td><td align="right">{{.LastDur}}</td><td>{{.Failures}}</td></tr>
{{end}}</table>{{end}}
<h2 style="font-size:16px;margin:20px 0 6px">Top incidents</h2>
{{if .Incidents}}<table cellpadding="4" cellspacing="0" border="0" style="border-collapse:collapse">
<tr style="background:#fafafa"><th align="left">Severity</th><th align="left">Alert</th><th align="left">Instances</th><th align="left">Start</th><th align="right">Duration</th></tr>
{{range .Incidents}}<tr><td>{{.Severity}}</td><td>{{.Alert}}</td><td>{{.Instances}}</td><td>{{.Start}}</td><td align="right">{{.Duration}}</td></tr>
{{end}}</table>{{else}}<p>No alert fired this week.</p>{{end}}
{{if .Releases}}<h2 style="font-size:16px;margin:20px 0 6px">Releases</h2>
<table cellpadding="4" cellspacing="0" border="0" style="border-collapse:collapse">
<tr style="background:#fafafa"><th align="left">Released</th><th align="left">Release</th><th align="left">SLO</th><th align="right">P95 before</th><th align="right">P95 after</th><th align="right">Change</th></tr>
{{range .Releases}}{{$r := .}}{{range $i, $l := .Latency}}<tr><td>{{if eq $i 0}}{{$r.At}}{{end}}</td><td>{{if eq $i 0}}{{$r.Text}}{{end}}</td><td>{{$l.SLO}}{{with $l.Target}} · {{.}}{{end}}</td><td align="right">{{$l.Before}}</td><td align="right">{{$l.After}}</td><td align="right">{{$l.Change}}</td></tr>
{{else}}<tr><td>{{$r.At}}</td><td>{{$r.Text}}</td><td colspan="4">no latency SLO traffic around it</td></tr>
{{end}}{{end}}</table>{{end}}
</body></html>
`))
