package dashboard

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

	"github.com/aiserve/appliance/config"
)

// Service is one model service: a job and a model (the job alone when the
// engine has no model label). Its JSON is the contract's service object.
type Service struct {
	Job        string   `json:"job"`
	Model      string   `json:"model"`
	Engine     string   `json:"engine"`
	ModelLabel string   `json:"model_label"`
	Instances  []string `json:"instances"`
	Probes     []string `json:"probes"`
	Selector   string   `json:"selector"`
}

// ID is the service's row id: job, or job/model.
func (s *Service) ID() string {
	if s.Model == "" {
		return s.Job
	}
	return s.Job + "/" + s.Model
}

// ProbeTarget is what the matching of probes to services reads of a probe.
type ProbeTarget struct {
	Name string
	URL  string
	// Model is the llm probe's model, "" for http probes.
	Model string
}

// ProbeTargetsOf returns the targets of configured probes.
func ProbeTargetsOf(probes []*config.ProbeConfig) []ProbeTarget {
	out := make([]ProbeTarget, 0, len(probes))
	for _, p := range probes {
		out = append(out, ProbeTarget{Name: p.Name, URL: p.URL, Model: p.Model})
	}
	return out
}

// Inventory is what storage holds over a time range: the metric names and
// the services.
type Inventory struct {
	Names    map[string]bool
	Services []*Service
	// Probes are the probe names with series in the range.
	Probes []string
}

// Has reports whether name exists, as a series name or as a histogram's
// base name (name_bucket exists).
func (inv *Inventory) Has(name string) bool {
	return inv.Names[name] || inv.Names[name+"_bucket"]
}

// selfMetric marks the appliance's own scrape job, which is no service.
const selfMetric = "appliance_build_info"

// Discover reads the metric names and the services stored in [mint, maxt]
// (milliseconds). Each engine with identify metrics claims the jobs whose
// series of those metrics exist, in engines.yaml's order; any other job
// with an up series is a generic service. probes are matched to services by
// their URL's host:port (and model, when both have one).
func (c *Catalog) Discover(ctx context.Context, q storage.Queryable, mint, maxt int64, probes []ProbeTarget) (*Inventory, error) {
	qr, err := q.Querier(mint, maxt)
	if err != nil {
		return nil, fmt.Errorf("open querier: %w", err)
	}
	defer qr.Close()
	names, _, err := qr.LabelValues(ctx, labels.MetricName, nil)
	if err != nil {
		return nil, fmt.Errorf("read metric names: %w", err)
	}
	inv := &Inventory{Names: make(map[string]bool, len(names))}
	for _, n := range names {
		inv.Names[n] = true
	}
	hints := &storage.SelectHints{Start: mint, End: maxt, Func: "series"}
	series := func(name string, f func(labels.Labels)) error {
		if !inv.Names[name] {
			return nil
		}
		ss := qr.Select(ctx, false, hints, labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, name))
		for ss.Next() {
			f(ss.At().Labels())
		}
		if err := ss.Err(); err != nil {
			return fmt.Errorf("read series of %s: %w", name, err)
		}
		return nil
	}

	self := map[string]bool{}
	if err := series(selfMetric, func(ls labels.Labels) { self[ls.Get("job")] = true }); err != nil {
		return nil, err
	}
	claimed := map[string]bool{}
	byKey := map[string]*Service{}
	add := func(engine, modelLabel, job, model, instance string) {
		key := job + "\x00" + model
		s := byKey[key]
		if s == nil {
			s = &Service{Job: job, Model: model, Engine: engine, ModelLabel: modelLabel, Instances: []string{}, Probes: []string{}}
			byKey[key] = s
			inv.Services = append(inv.Services, s)
		}
		if instance != "" && !slices.Contains(s.Instances, instance) {
			s.Instances = append(s.Instances, instance)
		}
	}
	for _, name := range c.Engines.Order {
		e := c.Engines.Engines[name]
		if len(e.Identify) == 0 {
			continue
		}
		jobs := map[string]bool{}
		for _, m := range e.Identify {
			err := series(m, func(ls labels.Labels) {
				job := ls.Get("job")
				if claimed[job] || self[job] {
					return
				}
				model := ""
				if e.ModelLabel != "" {
					model = ls.Get(e.ModelLabel)
				}
				jobs[job] = true
				add(name, e.ModelLabel, job, model, ls.Get("instance"))
			})
			if err != nil {
				return nil, err
			}
		}
		for j := range jobs {
			claimed[j] = true
		}
	}
	if g, ok := c.Engines.Engines["generic"]; ok {
		for _, m := range g.NotIf {
			if err := series(m, func(ls labels.Labels) { claimed[ls.Get("job")] = true }); err != nil {
				return nil, err
			}
		}
		err := series("up", func(ls labels.Labels) {
			job := ls.Get("job")
			if job == "" || claimed[job] || self[job] {
				return
			}
			add("generic", "", job, "", ls.Get("instance"))
		})
		if err != nil {
			return nil, err
		}
	}
	if err := series("probe_success", func(ls labels.Labels) {
		if p := ls.Get("probe"); p != "" && !slices.Contains(inv.Probes, p) {
			inv.Probes = append(inv.Probes, p)
		}
	}); err != nil {
		return nil, err
	}
	sort.Strings(inv.Probes)

	sort.Slice(inv.Services, func(i, j int) bool {
		a, b := inv.Services[i], inv.Services[j]
		if a.Job != b.Job {
			return a.Job < b.Job
		}
		return a.Model < b.Model
	})
	matched := map[string]bool{}
	known := map[string]bool{}
	for _, p := range probes {
		known[p.Name] = true
	}
	for _, s := range inv.Services {
		sort.Strings(s.Instances)
		s.Selector = s.selector()
		for _, p := range probes {
			if s.matches(p) && !slices.Contains(s.Probes, p.Name) {
				s.Probes = append(s.Probes, p.Name)
				matched[p.Name] = true
			}
		}
		// Probes that auto-detection made are named <job>-<port>.
		for _, name := range inv.Probes {
			if !known[name] && s.autodetected(name) && !slices.Contains(s.Probes, name) {
				s.Probes = append(s.Probes, name)
			}
		}
		sort.Strings(s.Probes)
	}
	// Ollama has no /metrics: its service is its probes.
	for _, p := range probes {
		if matched[p.Name] || !isOllama(p.URL) {
			continue
		}
		u, _ := url.Parse(p.URL)
		s := &Service{Job: "ollama", Model: p.Model, Engine: "ollama", Instances: []string{u.Host}, Probes: []string{p.Name}}
		if i := slices.IndexFunc(inv.Services, func(o *Service) bool { return o.Engine == "ollama" && o.Model == s.Model }); i >= 0 {
			o := inv.Services[i]
			if !slices.Contains(o.Instances, u.Host) {
				o.Instances = append(o.Instances, u.Host)
			}
			o.Probes = append(o.Probes, p.Name)
			continue
		}
		inv.Services = append(inv.Services, s)
	}
	sort.SliceStable(inv.Services, func(i, j int) bool {
		a, b := inv.Services[i], inv.Services[j]
		if a.Job != b.Job {
			return a.Job < b.Job
		}
		return a.Model < b.Model
	})
	return inv, nil
}

// isOllama reports whether a probe URL is Ollama's: its default port, or
// its native API (/api/...).
func isOllama(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return false
	}
	return u.Port() == "11434" || strings.HasPrefix(u.Path, "/api/")
}

func (s *Service) selector() string {
	sel := "job=" + strconv.Quote(s.Job)
	if s.ModelLabel != "" && s.Model != "" {
		sel += "," + s.ModelLabel + "=" + strconv.Quote(s.Model)
	}
	return sel
}

// matches reports whether probe p targets one of the service's instances.
func (s *Service) matches(p ProbeTarget) bool {
	if p.Model != "" && s.Model != "" && p.Model != s.Model {
		return false
	}
	u, err := url.Parse(p.URL)
	if err != nil || u.Host == "" {
		return false
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	for _, in := range s.Instances {
		ih, ip, err := net.SplitHostPort(in)
		if err != nil {
			continue
		}
		if ip == port && sameHost(ih, host) {
			return true
		}
	}
	return false
}

// autodetected reports whether probe name is auto-detection's name for one
// of the service's instances: <job>-<port> (scrape/autodetect names the job
// after the server's kind and the probe after kind and port).
func (s *Service) autodetected(name string) bool {
	port, ok := strings.CutPrefix(name, s.Job+"-")
	if !ok {
		return false
	}
	for _, in := range s.Instances {
		if _, ip, err := net.SplitHostPort(in); err == nil && ip == port {
			return true
		}
	}
	return false
}

func sameHost(a, b string) bool {
	local := func(h string) bool { return h == "localhost" || h == "127.0.0.1" || h == "::1" }
	return strings.EqualFold(a, b) || (local(a) && local(b))
}
