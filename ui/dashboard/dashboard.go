package dashboard

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

//go:embed engines.yaml dashboards/*.yaml
var embedded embed.FS

// Scopes of a dashboard.
const (
	// ScopeServices repeats the first row's panels once per service.
	ScopeServices = "services"
	// ScopeService shows one service (the page's job and model).
	ScopeService = "service"
	// ScopeGlobal has no service: only namespaced keys ({{gpu.util}}).
	ScopeGlobal = "global"
)

// Kinds and units a panel may have.
var (
	Kinds = []string{"timeseries", "stat", "heatmap", "table", "status"}
	Units = []string{"s", "ms", "percent", "ratio", "bytes", "reqps", "tokps", "celsius", "watts", "mhz", "short"}
)

// Definition is one dashboard file.
type Definition struct {
	ID    string   `yaml:"id" json:"id"`
	Title string   `yaml:"title" json:"title"`
	Scope string   `yaml:"scope" json:"scope"`
	Rows  []RowDef `yaml:"rows" json:"rows"`
	// Source is "embedded" or the file's path.
	Source string `yaml:"-" json:"source"`
}

// RowDef is a row of a definition.
type RowDef struct {
	ID     string     `yaml:"id" json:"id"`
	Title  string     `yaml:"title" json:"title"`
	Panels []PanelDef `yaml:"panels" json:"panels"`
}

// PanelDef is a panel of a definition: Queries for every engine, or the
// engine's own list in ByEngine.
type PanelDef struct {
	ID          string             `yaml:"id"`
	Title       string             `yaml:"title"`
	Kind        string             `yaml:"kind"`
	Unit        string             `yaml:"unit"`
	Stack       bool               `yaml:"stack"`
	Description string             `yaml:"description"`
	Queries     []Query            `yaml:"queries"`
	ByEngine    map[string][]Query `yaml:"by_engine"`
	Thresholds  []Threshold        `yaml:"thresholds"`
	// Keep shows the panel even when its metrics are not stored yet,
	// under their first names (for counts that are 0 until something
	// happens, such as firing alerts).
	Keep bool `yaml:"keep"`
}

// Query is one PromQL expression of a panel.
type Query struct {
	Expr   string `yaml:"expr" json:"expr"`
	Legend string `yaml:"legend" json:"legend"`
	// When limits the query to rows whose service has probes ("probes")
	// or has none ("no_probes"); "" is always.
	When string `yaml:"when,omitempty" json:"-"`
}

// Threshold is a line or colour step of a panel.
type Threshold struct {
	Value float64 `yaml:"value" json:"value"`
	Color string  `yaml:"color" json:"color"`
}

// Engine is one entry of engines.yaml.
type Engine struct {
	// ModelLabel is the label carrying the model, "" when the engine has
	// none.
	ModelLabel string `yaml:"model_label"`
	// Identify lists the metrics whose series are the engine's services.
	Identify []string `yaml:"identify"`
	// NotIf lists metrics whose presence in a job keeps the job from being
	// a service of this engine (generic: hardware exporters).
	NotIf []string `yaml:"not_if"`
	// Metrics maps a key to candidate names, first existing one wins.
	Metrics map[string][]string `yaml:"metrics"`
	// Breakdown names the request's phases (breakdown.go); nil for none.
	Breakdown *BreakdownDef `yaml:"breakdown"`
	// Signals are what explain reads next to the phases.
	Signals []SignalDef `yaml:"signals"`
}

// Engines is engines.yaml.
type Engines struct {
	Engines map[string]*Engine `yaml:"engines"`
	// Signals are the box's own signals, read for every service.
	Signals []SignalDef `yaml:"signals"`
	// Order is the order of the engines in the file (identification
	// tries them in this order).
	Order []string `yaml:"-"`
}

var (
	keyRe = regexp.MustCompile(`\{\{([a-z0-9_]+(?:\.[a-z0-9_]+)?)\}\}`)
	idRe  = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
)

// LoadEngines reads the embedded engines.yaml.
func LoadEngines() (*Engines, error) {
	data, err := embedded.ReadFile("engines.yaml")
	if err != nil {
		return nil, fmt.Errorf("read embedded engines.yaml: %w", err)
	}
	return parseEngines(data)
}

func parseEngines(data []byte) (*Engines, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("engines.yaml: %w", err)
	}
	var e Engines
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&e); err != nil {
		return nil, fmt.Errorf("engines.yaml: %w", err)
	}
	// The order of the engines mapping, for identification.
	if len(doc.Content) == 1 && len(doc.Content[0].Content) >= 2 {
		m := doc.Content[0].Content[1]
		for i := 0; i+1 < len(m.Content); i += 2 {
			e.Order = append(e.Order, m.Content[i].Value)
		}
	}
	return &e, nil
}

// Catalog is the embedded dashboards plus those of a user directory.
type Catalog struct {
	Engines *Engines
	defs    []*Definition
}

// NewCatalog loads the embedded definitions and engines.yaml.
func NewCatalog() (*Catalog, error) {
	eng, err := LoadEngines()
	if err != nil {
		return nil, err
	}
	c := &Catalog{Engines: eng}
	if errs := c.checkBreakdowns(); len(errs) > 0 {
		return nil, fmt.Errorf("engines.yaml: %w", errors.Join(errs...))
	}
	files, err := embedded.ReadDir("dashboards")
	if err != nil {
		return nil, fmt.Errorf("read embedded dashboards: %w", err)
	}
	for _, f := range files {
		data, err := embedded.ReadFile("dashboards/" + f.Name())
		if err != nil {
			return nil, fmt.Errorf("read embedded dashboard %s: %w", f.Name(), err)
		}
		d, err := c.parse(data, "embedded")
		if err != nil {
			return nil, fmt.Errorf("embedded dashboard %s: %w", f.Name(), err)
		}
		c.defs = append(c.defs, d)
	}
	order := []string{"overview", "model", "probes", "hardware"}
	sort.SliceStable(c.defs, func(i, j int) bool {
		return slices.Index(order, c.defs[i].ID) < slices.Index(order, c.defs[j].ID)
	})
	return c, nil
}

// Embedded returns the embedded definitions, overview first.
func (c *Catalog) Embedded() []*Definition { return c.defs }

// WithDir returns the embedded definitions followed by those in dir
// (*.yaml, *.yml, *.json, in name order), and one error per file that does
// not load, naming the file; the other files still load. A user file may
// not reuse an id already taken. dir "" adds nothing.
func (c *Catalog) WithDir(dir string) ([]*Definition, []error) {
	defs := slices.Clone(c.defs)
	if dir == "" {
		return defs, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return defs, []error{fmt.Errorf("ui.dashboards_dir %s: %w", dir, err)}
	}
	var errs []error
	for _, ent := range entries {
		ext := strings.ToLower(filepath.Ext(ent.Name()))
		if ent.IsDir() || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
			continue
		}
		path := filepath.Join(dir, ent.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("dashboard %s: %w", path, err))
			continue
		}
		d, err := c.parse(data, path)
		if err != nil {
			errs = append(errs, fmt.Errorf("dashboard %s: %w", path, err))
			continue
		}
		if i := slices.IndexFunc(defs, func(o *Definition) bool { return o.ID == d.ID }); i >= 0 {
			errs = append(errs, fmt.Errorf("dashboard %s: id %q is already taken by %s", path, d.ID, defs[i].Source))
			continue
		}
		defs = append(defs, d)
	}
	return defs, errs
}

// parse decodes and checks one definition (YAML or JSON, unknown keys are
// errors).
func (c *Catalog) parse(data []byte, source string) (*Definition, error) {
	var d Definition
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&d); err != nil {
		return nil, err
	}
	d.Source = source
	if d.Scope == "" {
		d.Scope = ScopeGlobal
	}
	if err := c.check(&d); err != nil {
		return nil, err
	}
	return &d, nil
}

// check validates ids, kinds, units, scopes and every metric key.
func (c *Catalog) check(d *Definition) error {
	var errs []error
	if !idRe.MatchString(d.ID) {
		errs = append(errs, fmt.Errorf("id %q: want lower-case letters, digits, - and _", d.ID))
	}
	if !slices.Contains([]string{ScopeServices, ScopeService, ScopeGlobal}, d.Scope) {
		errs = append(errs, fmt.Errorf("scope %q: want services, service or global", d.Scope))
	}
	if len(d.Rows) == 0 {
		errs = append(errs, errors.New("no rows"))
	}
	panelIDs := map[string]string{}
	for _, r := range d.Rows {
		if !idRe.MatchString(r.ID) {
			errs = append(errs, fmt.Errorf("row id %q: want lower-case letters, digits, - and _", r.ID))
		}
		for _, p := range r.Panels {
			where := fmt.Sprintf("row %s panel %s", r.ID, p.ID)
			if !idRe.MatchString(p.ID) {
				errs = append(errs, fmt.Errorf("%s: id: want lower-case letters, digits, - and _", where))
			}
			if prev, dup := panelIDs[p.ID]; dup {
				errs = append(errs, fmt.Errorf("%s: id already used in row %s", where, prev))
			}
			panelIDs[p.ID] = r.ID
			if !slices.Contains(Kinds, p.Kind) {
				errs = append(errs, fmt.Errorf("%s: kind %q: want one of %s", where, p.Kind, strings.Join(Kinds, ", ")))
			}
			if !slices.Contains(Units, p.Unit) {
				errs = append(errs, fmt.Errorf("%s: unit %q: want one of %s", where, p.Unit, strings.Join(Units, ", ")))
			}
			if len(p.Queries) == 0 && len(p.ByEngine) == 0 {
				errs = append(errs, fmt.Errorf("%s: no queries", where))
			}
			check := func(engine string, qs []Query) {
				for _, q := range qs {
					if strings.TrimSpace(q.Expr) == "" {
						errs = append(errs, fmt.Errorf("%s: empty expr", where))
					}
					if q.When != "" && q.When != "probes" && q.When != "no_probes" {
						errs = append(errs, fmt.Errorf("%s: when %q: want probes or no_probes", where, q.When))
					}
					for _, m := range keyRe.FindAllStringSubmatch(q.Expr, -1) {
						if err := c.checkKey(d.Scope, engine, m[1]); err != nil {
							errs = append(errs, fmt.Errorf("%s: %w", where, err))
						}
					}
				}
			}
			check("", p.Queries)
			for eng, qs := range p.ByEngine {
				if e, ok := c.Engines.Engines[eng]; !ok || len(e.Identify) == 0 {
					errs = append(errs, fmt.Errorf("%s: by_engine %q is not a model-server engine of engines.yaml", where, eng))
					continue
				}
				check(eng, qs)
			}
		}
	}
	return errors.Join(errs...)
}

// checkKey reports a key that no engine defines. An unnamespaced key must
// be defined by engine (or, for the default queries, by some engine).
func (c *Catalog) checkKey(scope, engine, key string) error {
	ns, name, ok := strings.Cut(key, ".")
	if ok {
		e, found := c.Engines.Engines[ns]
		if !found || e.Metrics[name] == nil {
			return fmt.Errorf("metric key {{%s}} is not in engines.yaml", key)
		}
		return nil
	}
	if scope == ScopeGlobal {
		return fmt.Errorf("metric key {{%s}} needs a namespace ({{engine.%s}}) in a dashboard of scope global", key, key)
	}
	if engine != "" {
		if c.Engines.Engines[engine].Metrics[key] == nil {
			return fmt.Errorf("metric key {{%s}} is not defined for engine %s in engines.yaml", key, engine)
		}
		return nil
	}
	for _, e := range c.Engines.Engines {
		if e.Metrics[key] != nil {
			return nil
		}
	}
	return fmt.Errorf("metric key {{%s}} is not defined by any engine in engines.yaml", key)
}
