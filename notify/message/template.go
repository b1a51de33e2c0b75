package message

import (
	"bytes"
	"fmt"
	"html/template"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	ttemplate "text/template"
	"time"
)

// Funcs are the functions the default templates and the templated
// receivers (sms_configs, voice_configs) may use.
var Funcs = ttemplate.FuncMap{
	"join":        strings.Join,
	"upper":       strings.ToUpper,
	"since":       func(t, now time.Time) string { return now.Sub(t).Round(time.Second).String() },
	"sortedPairs": sortedPairs,
	// Alertmanager's template functions, for its template files.
	"toUpper":   strings.ToUpper,
	"toLower":   strings.ToLower,
	"title":     strings.Title, //nolint:staticcheck // Alertmanager's "title" is strings.Title
	"trimSpace": strings.TrimSpace,
	"safeHtml":  func(s string) string { return s },
	"reReplaceAll": func(pattern, repl, text string) string {
		return regexp.MustCompile(pattern).ReplaceAllString(text, repl)
	},
	"truncate": func(n int, s string) string {
		if r := []rune(s); len(r) > n {
			return string(r[:n-1]) + "…"
		}
		return s
	},
}

// Pair is a label name and value.
type Pair struct{ Name, Value string }

func sortedPairs(m map[string]string) []Pair {
	out := make([]Pair, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, Pair{k, m[k]})
	}
	return out
}

var titleTmpl = ttemplate.Must(ttemplate.New("title").Funcs(Funcs).Parse(
	`[{{ .Status | upper }}{{ if eq .Status "firing" }}:{{ .Firing }}{{ end }}]{{ with .CommonLabels.severity }} {{ . }}{{ end }} {{ .Name }}{{ with .CommonLabels.job }} ({{ . }}){{ end }}`))

var textTmpl = ttemplate.Must(ttemplate.New("text").Funcs(Funcs).Parse(
	`{{ range .Alerts }}{{ if eq .Status "firing" }}🔥{{ else }}✅{{ end }} **{{ or .Annotations.summary .Labels.alertname }}**
{{ with .Annotations.description }}{{ . }}
{{ end }}{{ with .Labels.instance }}- instance: {{ . }}
{{ end }}{{ with .Annotations.breaching_instances }}- breaching: {{ . }}
{{ end }}- severity: {{ or .Labels.severity "none" }}
- since: {{ .StartsAt.UTC.Format "2006-01-02 15:04:05 UTC" }}{{ if eq .Status "firing" }} (for {{ since .StartsAt $.At }}){{ else }}, resolved {{ .EndsAt.UTC.Format "15:04:05 UTC" }}{{ end }}
- labels: {{ range $i, $p := sortedPairs .Labels }}{{ if $i }}, {{ end }}{{ $p.Name }}={{ $p.Value }}{{ end }}
{{ with .GeneratorURL }}- source: {{ . }}
{{ end }}
{{ end }}{{ with .ExternalURL }}Open in the appliance: {{ . }}/alerts
{{ end }}`))

var htmlTmpl = template.Must(template.New("html").Parse(
	`<html><body><h2>{{ .Title }}</h2>{{ range .Alerts }}<h3>{{ or .Annotations.summary .Labels.alertname }} ({{ .Status }})</h3><p>{{ .Annotations.description }}</p><ul>{{ range $k, $v := .Labels }}<li>{{ $k }}={{ $v }}</li>{{ end }}</ul><p>since {{ .StartsAt.UTC.Format "2006-01-02 15:04:05 UTC" }}</p>{{ end }}{{ with .ExternalURL }}<p><a href="{{ . }}/alerts">Open in the appliance</a></p>{{ end }}</body></html>`))

// Data is what the title and text templates see: the Message's fields
// (.Status, .Alerts, .CommonLabels, .CommonAnnotations, .GroupLabels,
// .ExternalURL, .At, ...) plus .Name, the alert names, and .Firing, how
// many alerts fire.
type Data struct {
	*Message
	Name   string
	Firing int
}

// Templates renders messages: the defaults, or an operator's title and
// text (Go text/template over Data, with Funcs).
type Templates struct {
	title, text *ttemplate.Template
}

// DefaultTemplates are the built-in title and text.
var DefaultTemplates = &Templates{title: titleTmpl, text: textTmpl}

// ParseTemplates parses an operator's title and text templates; an empty
// one keeps the default.
func ParseTemplates(title, text string) (*Templates, error) {
	t := *DefaultTemplates
	var err error
	if title != "" {
		if t.title, err = ttemplate.New("title").Funcs(Funcs).Option("missingkey=zero").Parse(title); err != nil {
			return nil, fmt.Errorf("title template: %w", err)
		}
	}
	if text != "" {
		if t.text, err = ttemplate.New("text").Funcs(Funcs).Option("missingkey=zero").Parse(text); err != nil {
			return nil, fmt.Errorf("text template: %w", err)
		}
	}
	return &t, nil
}

// ParseTemplateFiles is ParseTemplates with Alertmanager's template files
// (globs): their named templates ({{ define "name" }}) may be called from
// title and text ({{ template "name" . }}), which see Alertmanager's names
// (.Status, .Receiver, .GroupLabels, .CommonLabels, .CommonAnnotations,
// .ExternalURL, .Alerts, .Alerts.Firing, .Alerts.Resolved).
func ParseTemplateFiles(title, text string, files []string) (*Templates, error) {
	if len(files) == 0 {
		return ParseTemplates(title, text)
	}
	base := ttemplate.New("").Funcs(Funcs).Option("missingkey=zero")
	for _, pat := range files {
		ms, err := filepath.Glob(pat)
		if err != nil {
			return nil, fmt.Errorf("template files %q: %w", pat, err)
		}
		for _, f := range ms {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("template file: %w", err)
			}
			if _, err := base.New(filepath.Base(f)).Parse(string(b)); err != nil {
				return nil, fmt.Errorf("template file %s: %w", f, err)
			}
		}
	}
	t := *DefaultTemplates
	for _, x := range []struct {
		name, src string
		dst       **ttemplate.Template
	}{{"title", title, &t.title}, {"text", text, &t.text}} {
		if x.src == "" {
			continue
		}
		c, err := base.Clone()
		if err != nil {
			return nil, fmt.Errorf("%s template: %w", x.name, err)
		}
		if *x.dst, err = c.New(x.name).Parse(x.src); err != nil {
			return nil, fmt.Errorf("%s template: %w", x.name, err)
		}
	}
	return &t, nil
}

// Render sets Title, Text and HTML of an alerts message from its alerts
// with the default templates.
func Render(m *Message) error { return DefaultTemplates.Render(m) }

// Render sets Title, Text and HTML of an alerts message from its alerts.
func (t *Templates) Render(m *Message) error {
	d := Data{Message: m, Name: m.CommonLabels["alertname"]}
	if d.Name == "" {
		names := map[string]bool{}
		for _, a := range m.Alerts {
			names[a.Labels["alertname"]] = true
		}
		d.Name = strings.Join(slices.Sorted(maps.Keys(names)), ", ")
	}
	for _, a := range m.Alerts {
		if a.Status == "firing" {
			d.Firing++
		}
	}
	var b bytes.Buffer
	if err := t.title.Execute(&b, d); err != nil {
		return fmt.Errorf("render title: %w", err)
	}
	m.Title = strings.TrimSpace(b.String())
	b.Reset()
	if err := t.text.Execute(&b, d); err != nil {
		return fmt.Errorf("render text: %w", err)
	}
	m.Text = strings.TrimSpace(b.String())
	b.Reset()
	if err := htmlTmpl.Execute(&b, m); err != nil {
		return fmt.Errorf("render html: %w", err)
	}
	m.HTML = b.String()
	return nil
}

// SortAlerts orders alerts firing first, then by start time and labels, so
// that messages read the same every time.
func SortAlerts(as []Alert) {
	sort.SliceStable(as, func(i, j int) bool {
		if as[i].Status != as[j].Status {
			return as[i].Status == "firing"
		}
		if !as[i].StartsAt.Equal(as[j].StartsAt) {
			return as[i].StartsAt.Before(as[j].StartsAt)
		}
		return as[i].Fingerprint < as[j].Fingerprint
	})
}
