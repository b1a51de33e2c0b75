package dashboard

import (
	"regexp"
	"strconv"
	"strings"
)

// Dashboard is a resolved dashboard, as GET /api/v1/appliance/dashboards/<id>
// answers it.
type Dashboard struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Source string `json:"source"`
	// Service is the service a dashboard of scope service shows.
	Service *Service `json:"service,omitempty"`
	Rows    []Row    `json:"rows"`
}

// Row is a resolved row; Service is set on the overview's per-service rows.
type Row struct {
	ID      string   `json:"id"`
	Title   string   `json:"title"`
	Service *Service `json:"service,omitempty"`
	Panels  []Panel  `json:"panels"`
}

// Panel is a resolved panel: metric names chosen, server placeholders
// filled in.
type Panel struct {
	ID          string      `json:"id"`
	Title       string      `json:"title"`
	Kind        string      `json:"kind"`
	Unit        string      `json:"unit"`
	Stack       bool        `json:"stack"`
	Queries     []Query     `json:"queries"`
	Thresholds  []Threshold `json:"thresholds,omitempty"`
	Description string      `json:"description,omitempty"`
}

// Filter is the page's job, model and instance.
type Filter struct {
	Job, Model, Instance string
}

func (f Filter) matches(s *Service) bool {
	return (f.Job == "" || f.Job == s.Job) && (f.Model == "" || f.Model == s.Model)
}

// Resolve chooses the panels of d that inv's metrics fill.
//
//   - scope services: one row per service matching f, with the panels of
//     every row of d; with no service, one row "box" with the panels that
//     need no service (GPU, alerts, targets).
//   - scope service: the first service matching f (the page's job and
//     model); Dashboard.Service says which.
//   - scope global: the rows of d; $probes narrows to the probes of the
//     services matching f when f names a job or model.
//
// Rows left without panels are dropped.
func (c *Catalog) Resolve(d *Definition, inv *Inventory, f Filter) *Dashboard {
	out := &Dashboard{ID: d.ID, Title: d.Title, Source: d.Source, Rows: []Row{}}
	switch d.Scope {
	case ScopeServices:
		var all []PanelDef
		for _, r := range d.Rows {
			all = append(all, r.Panels...)
		}
		for _, s := range inv.Services {
			if !f.matches(s) {
				continue
			}
			row := Row{ID: rowID(s), Title: s.ID(), Service: s, Panels: c.panels(all, inv, s, nil)}
			if len(row.Panels) > 0 {
				out.Rows = append(out.Rows, row)
			}
		}
		if len(out.Rows) == 0 && f.Job == "" && f.Model == "" {
			row := Row{ID: "box", Title: "This box", Panels: c.panels(all, inv, nil, nil)}
			if len(row.Panels) > 0 {
				out.Rows = append(out.Rows, row)
			}
		}
	case ScopeService:
		for _, s := range inv.Services {
			if f.matches(s) {
				out.Service = s
				break
			}
		}
		for _, r := range d.Rows {
			row := Row{ID: r.ID, Title: r.Title, Panels: c.panels(r.Panels, inv, out.Service, nil)}
			if len(row.Panels) > 0 {
				out.Rows = append(out.Rows, row)
			}
		}
	default:
		var probes []string // nil: every probe
		if f.Job != "" || f.Model != "" {
			probes = []string{}
			for _, s := range inv.Services {
				if f.matches(s) {
					probes = append(probes, s.Probes...)
				}
			}
		}
		for _, r := range d.Rows {
			row := Row{ID: r.ID, Title: r.Title, Panels: c.panels(r.Panels, inv, nil, probes)}
			if len(row.Panels) > 0 {
				out.Rows = append(out.Rows, row)
			}
		}
	}
	return out
}

var rowIDUnsafe = regexp.MustCompile(`[^A-Za-z0-9_.:-]+`)

// rowID is the service's row id: job or job:model, with characters outside
// [A-Za-z0-9_.:-] replaced by "_" (it becomes part of data-panel).
func rowID(s *Service) string {
	id := s.Job
	if s.Model != "" {
		id += ":" + s.Model
	}
	return rowIDUnsafe.ReplaceAllString(id, "_")
}

// panels resolves defs for service s (nil: none). probes overrides the
// probes of $probes for pages without a service (nil: every probe).
func (c *Catalog) panels(defs []PanelDef, inv *Inventory, s *Service, probes []string) []Panel {
	engine := ""
	if s != nil {
		engine = s.Engine
		probes = s.Probes
	}
	var out []Panel
	for _, pd := range defs {
		qs := pd.Queries
		if alt, ok := pd.ByEngine[engine]; ok && engine != "" {
			qs = alt
		}
		var resolved []Query
		for _, q := range qs {
			hasProbes := len(probes) > 0
			if (q.When == "probes" && !hasProbes) || (q.When == "no_probes" && hasProbes) {
				continue
			}
			expr, ok := c.expr(q.Expr, inv, engine, s, probes, pd.Keep)
			if ok {
				resolved = append(resolved, Query{Expr: expr, Legend: q.Legend})
			}
		}
		if len(resolved) == 0 {
			continue
		}
		out = append(out, Panel{
			ID: pd.ID, Title: pd.Title, Kind: pd.Kind, Unit: pd.Unit, Stack: pd.Stack,
			Queries: resolved, Thresholds: pd.Thresholds, Description: pd.Description,
		})
	}
	return out
}

// expr fills in metric keys and the server's placeholders; false when a
// key has no stored name or the query needs what the page lacks.
func (c *Catalog) expr(expr string, inv *Inventory, engine string, s *Service, probes []string, keep bool) (string, bool) {
	ok := true
	expr = keyRe.ReplaceAllStringFunc(expr, func(m string) string {
		key := m[2 : len(m)-2]
		ns, name, namespaced := strings.Cut(key, ".")
		if !namespaced {
			ns, name = engine, key
		}
		e := c.Engines.Engines[ns]
		if e == nil {
			ok = false
			return m
		}
		for _, cand := range e.Metrics[name] {
			if inv.Has(cand) {
				return cand
			}
		}
		if keep && len(e.Metrics[name]) > 0 {
			return e.Metrics[name][0]
		}
		ok = false
		return m
	})
	if !ok {
		return "", false
	}
	if strings.Contains(expr, "$probes") {
		switch {
		case probes == nil:
			expr = strings.ReplaceAll(expr, "$probes", "")
		case len(probes) == 0:
			return "", false
		default:
			expr = strings.ReplaceAll(expr, "$probes", `probe=~`+strconv.Quote(alternation(probes)))
		}
	}
	job, instances := "", ""
	if s != nil {
		job = "job=" + strconv.Quote(s.Job)
		instances = job
		if len(s.Instances) > 0 {
			instances += `,instance=~` + strconv.Quote(alternation(s.Instances))
		}
	}
	expr = strings.ReplaceAll(expr, "$instances", instances)
	expr = strings.ReplaceAll(expr, "$job", job)
	return expr, true
}

// alternation is a regular expression matching exactly the given values.
func alternation(vals []string) string {
	q := make([]string, len(vals))
	for i, v := range vals {
		q[i] = regexp.QuoteMeta(v)
	}
	return strings.Join(q, "|")
}
