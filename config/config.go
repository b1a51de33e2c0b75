package config

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	promconfig "github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/labels"
	yaml2 "go.yaml.in/yaml/v2"
	yaml3 "go.yaml.in/yaml/v3"

	// Service discoveries a scrape config may use on a single box. Each
	// registers its *_sd_configs key with Prometheus' discovery registry;
	// without it the key is an unknown field.
	_ "github.com/prometheus/prometheus/discovery/file"
	_ "github.com/prometheus/prometheus/discovery/http"
)

// DefaultGlobalConfig is Prometheus' global section with the intervals of
// the prometheus.yml that Prometheus ships (15s) instead of its built-in 1m:
// model servers change within a minute and the appliance is the only
// scraper, so the finer default costs little.
var DefaultGlobalConfig = func() promconfig.GlobalConfig {
	g := promconfig.DefaultGlobalConfig
	g.ScrapeInterval = model.Duration(15 * time.Second)
	g.ScrapeTimeout = model.Duration(10 * time.Second)
	g.EvaluationInterval = model.Duration(15 * time.Second)
	return g
}()

// unsupportedSections are sections of the design that later versions fill.
// They are refused rather than ignored so that nobody believes an alert
// route or a probe is active when it is not.
var unsupportedSections = []string{}

// sections are the keys the top level accepts, for suggestions.
var sections = []string{"global", "storage", "query", "scrape_configs", "scrape_config_files", "rule_files", "rule_packs", "rules", "web", "alerting", "probes", "slos", "pipelines", "reports", "collectors", "autodetect", "ui", "remote_read", "remote_write", "tracing", "otlp", "runtime"}

// patRulePath is Prometheus' check of rule_files and scrape_config_files
// patterns: a glob may only appear in the last path element.
var patRulePath = regexp.MustCompile(`^[^*]*(\*[^/]*)?$`)

// Config is the appliance's configuration file. A Config returned by Load is
// read-only: share it, replace it on reload, never modify it.
type Config struct {
	Global            promconfig.GlobalConfig    `yaml:"global"`
	Storage           StorageConfig              `yaml:"storage"`
	Query             QueryConfig                `yaml:"query"`
	ScrapeConfigs     []*promconfig.ScrapeConfig `yaml:"scrape_configs,omitempty"`
	ScrapeConfigFiles []string                   `yaml:"scrape_config_files,omitempty"`
	RuleFiles         []string                   `yaml:"rule_files,omitempty"`
	RulePacks         []string                   `yaml:"rule_packs,omitempty"`
	Rules             RulesConfig                `yaml:"rules,omitempty"`
	Web               WebConfig                  `yaml:"web"`
	Alerting          AlertingConfig             `yaml:"alerting,omitempty"`
	Probes            []*ProbeConfig             `yaml:"probes,omitempty"`
	Collectors        CollectorsConfig           `yaml:"collectors,omitempty"`
	Autodetect        AutodetectConfig           `yaml:"autodetect,omitempty"`
	UI                UIConfig                   `yaml:"ui,omitempty"`
	SLOs              []*SLOConfig               `yaml:"slos,omitempty"`
	Pipelines         []*PipelineConfig          `yaml:"pipelines,omitempty"`
	Reports           ReportsConfig              `yaml:"reports,omitempty"`
	// RemoteRead, Tracing, OTLP and Runtime are prometheus.yml's sections
	// the appliance reads and does not act on (see Warnings).
	RemoteRead RemoteReadConfigs `yaml:"remote_read,omitempty"`
	// RemoteWrite are the remotes every stored sample is also sent to.
	RemoteWrite RemoteWriteConfigs        `yaml:"remote_write,omitempty"`
	Tracing     *promconfig.TracingConfig `yaml:"tracing,omitempty"`
	OTLP        *promconfig.OTLPConfig    `yaml:"otlp,omitempty"`
	Runtime     *promconfig.RuntimeConfig `yaml:"runtime,omitempty"`

	warnings []*Error // what is mapped or ignored (Warnings)

	file string // as given to Load; "" for the embedded default
	raw  []byte // the file as read

	// Lines of items, for the checks that run after loading; nil when
	// the Config was not loaded from a file.
	root          *yaml3.Node
	scrapeNodes   []*yaml3.Node
	ruleFileLines []int
	rulePackLines []int
}

// defaults returns the configuration of an empty file.
func defaults() *Config {
	return &Config{
		Global:     DefaultGlobalConfig,
		Storage:    DefaultStorageConfig,
		Query:      DefaultQueryConfig,
		Web:        DefaultWebConfig,
		Collectors: DefaultCollectorsConfig,
		Autodetect: DefaultAutodetectConfig,
	}
}

// Filename returns the path the configuration was loaded from, or "" for
// the embedded default.
func (c *Config) Filename() string { return c.file }

// LoadFile reads and loads the configuration file at path; see Load.
func LoadFile(path string) (*Config, error) {
	cfg, errs := loadFile(path)
	if len(errs) > 0 {
		return nil, joinErrors(errs)
	}
	return cfg, nil
}

func loadFile(path string) (*Config, []error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, []error{&Error{File: path, Msg: fmt.Sprintf("cannot read configuration file: %v", err)}}
	}
	return load(data, path)
}

// Load parses, defaults and validates a configuration. filename names the
// file in errors, and relative paths in it (rule files, TLS files, scrape
// config files) are resolved against its directory. Loading is strict: an
// unknown key anywhere is an error. It reports every problem it finds, each
// as an *Error with the line it is about; several are joined with
// errors.Join.
func Load(data []byte, filename string) (*Config, error) {
	cfg, errs := load(data, filename)
	if len(errs) > 0 {
		return nil, joinErrors(errs)
	}
	return cfg, nil
}

// load returns the configuration as far as it could be read, and the
// errors; Check goes on with the rule files of a configuration with errors.
func load(data []byte, filename string) (*Config, []error) {
	l := &loader{file: filename, dir: filepath.Dir(filename)}
	if filename == "" {
		l.file, l.dir = "-", "."
	}
	cfg := l.load(data)
	cfg.file, cfg.raw = filename, data
	sortErrors(l.errs)
	return cfg, l.errs
}

// loader collects the errors of one file.
type loader struct {
	file string
	dir  string
	errs []error
}

// warn adds notes on what the file has that is mapped or ignored.
func (l *loader) warn(cfg *Config, line int, notes []string) {
	for _, n := range notes {
		cfg.warnings = append(cfg.warnings, &Error{File: l.file, Line: line, Msg: "warning: " + n})
	}
}

// Warnings returns what the configuration has that the appliance maps
// onto its own settings or ignores, "file:line: warning: ...", for
// `appliance check` and the log at start. They are not errors.
func (c *Config) Warnings() []*Error { return c.warnings }

// nonNil returns p, or a new zero value when the section was empty.
func nonNil[T any](p *T) *T {
	if p == nil {
		return new(T)
	}
	return p
}

func (l *loader) errorf(line int, format string, args ...any) {
	l.errs = append(l.errs, &Error{File: l.file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

func (l *loader) add(msgs []lineMsg) {
	for _, m := range msgs {
		l.errs = append(l.errs, &Error{File: l.file, Line: m.line, Msg: m.msg})
	}
}

// addErr adds an error of the YAML parser or of a non-YAML source.
func (l *loader) addErr(err error) {
	if e, ok := err.(*Error); ok {
		e.File = l.file
		l.errs = append(l.errs, e)
		return
	}
	l.add(splitYAMLError(err))
}

// decode decodes n into out unless n is empty, and reports whether it
// succeeded.
func (l *loader) decode(n *yaml3.Node, out any) bool {
	if isNull(n) {
		return true
	}
	msgs := decodeV2(n, out)
	l.add(msgs)
	return len(msgs) == 0
}

func (l *loader) load(data []byte) *Config {
	cfg := defaults()
	root, err := parseDocument(data)
	if err != nil {
		l.addErr(err)
		return cfg
	}
	if isNull(root) {
		return cfg
	}
	root = deref(root)
	if root.Kind != yaml3.MappingNode {
		l.errorf(root.Line, "the configuration must be a mapping of sections (global, storage, scrape_configs, ...)")
		return cfg
	}
	cfg.root = root

	var scrapeNode *yaml3.Node
	globalOK, webOK, reportsOK := true, true, true
	seen := map[string]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], deref(root.Content[i+1])
		if first, dup := seen[k.Value]; dup {
			l.errorf(k.Line, "%s: section already defined at line %d", k.Value, first)
			continue
		}
		seen[k.Value] = k.Line
		switch k.Value {
		case "global":
			globalOK = l.decodeGlobal(v, &cfg.Global)
		case "storage":
			if l.decode(v, &cfg.Storage) {
				l.warn(cfg, k.Line, cfg.Storage.notes)
			}
		case "remote_read":
			l.decode(v, &cfg.RemoteRead)
			// An entry that failed to decode is left nil; its error is
			// reported, and the stages' checks never see it.
			cfg.RemoteRead = slices.DeleteFunc(cfg.RemoteRead, func(c *promconfig.RemoteReadConfig) bool { return c == nil })
		case "remote_write":
			ok := l.decode(v, &cfg.RemoteWrite)
			cfg.RemoteWrite = slices.DeleteFunc(cfg.RemoteWrite, func(c *RemoteWriteConfig) bool { return c == nil })
			if ok {
				if err := cfg.RemoteWrite.check(); err != nil {
					l.errorf(k.Line, "%v", err)
				}
			}
		case "tracing":
			l.decode(v, &cfg.Tracing)
			cfg.Tracing = nonNil(cfg.Tracing)
		case "otlp":
			l.decode(v, &cfg.OTLP)
			cfg.OTLP = nonNil(cfg.OTLP)
		case "runtime":
			l.decode(v, &cfg.Runtime)
			cfg.Runtime = nonNil(cfg.Runtime)
		case "query":
			l.decode(v, &cfg.Query)
		case "web":
			webOK = l.decode(v, &cfg.Web)
		case "scrape_configs":
			scrapeNode = v
		case "scrape_config_files":
			cfg.ScrapeConfigFiles, _ = l.decodePaths(k.Value, v, "scrape config file")
		case "rule_files":
			cfg.RuleFiles, cfg.ruleFileLines = l.decodePaths(k.Value, v, "rule file")
		case "rule_packs":
			cfg.RulePacks, cfg.rulePackLines = l.decodeRulePacks(v)
		case "rules":
			l.decode(v, &cfg.Rules)
		case "alerting":
			if l.decode(v, &cfg.Alerting) {
				l.warn(cfg, k.Line, cfg.Alerting.notes)
			}
		case "probes":
			if l.decode(v, &cfg.Probes) {
				l.checkProbes(v, cfg.Probes)
			}
		case "slos":
			cfg.SLOs = l.decodeSLOs(v)
		case "pipelines":
			cfg.Pipelines = l.decodePipelines(v)
		case "reports":
			reportsOK = l.decode(v, &cfg.Reports)
		case "collectors":
			l.decode(v, &cfg.Collectors)
		case "autodetect":
			l.decode(v, &cfg.Autodetect)
		case "ui":
			l.decode(v, &cfg.UI)
		default:
			if slices.Contains(unsupportedSections, k.Value) {
				l.errorf(k.Line, "%s: not supported by this version yet", k.Value)
				continue
			}
			msg := fmt.Sprintf("unknown field %q", k.Value)
			if s := suggest(k.Value, sections); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			l.errorf(k.Line, "%s", msg)
		}
	}
	// Scrape configs take their defaults from global, wherever it is in
	// the file. If global is broken, its errors are reported and the
	// scrape configs are only parsed, since checking them against a
	// global the operator did not write would report false errors.
	if scrapeNode != nil {
		cfg.ScrapeConfigs, cfg.scrapeNodes = l.decodeScrapeConfigs("scrape_configs", scrapeNode, cfg.Global, globalOK, map[string]string{})
	}
	cfg.Alerting.external = cfg.Global.ExternalLabels
	for _, n := range cfg.topNotes() {
		// The line of the section the note is about.
		sec, _, _ := strings.Cut(n, " ")
		sec = strings.TrimSuffix(sec, ":")
		l.warn(cfg, keyLine(root, sec), []string{n})
	}
	l.checkSLOReferences(root, cfg, reportsOK)
	cfg.setDirectory(l.dir)
	if t := cfg.Web.TLSServerConfig; t != nil && webOK {
		if key, err := t.checkFiles(); err != nil {
			_, web := mappingKey(root, "web")
			l.errorf(keyLine(web, "tls_server_config", key), "%v", err)
		}
	}
	return cfg
}

// decodeGlobal decodes the global section the way Prometheus does, then
// applies the appliance's interval defaults where the section left the key
// out.
func (l *loader) decodeGlobal(n *yaml3.Node, g *promconfig.GlobalConfig) bool {
	if isNull(n) {
		return true
	}
	var pg promconfig.GlobalConfig
	if !l.decode(n, &pg) {
		return false
	}
	// Prometheus' UnmarshalYAML fills a missing interval with its own
	// default (1m); tell missing from an explicit 1m by the key.
	if k, _ := mappingKey(n, "scrape_interval"); k == nil {
		pg.ScrapeInterval = DefaultGlobalConfig.ScrapeInterval
		if tk, _ := mappingKey(n, "scrape_timeout"); tk == nil {
			pg.ScrapeTimeout = min(DefaultGlobalConfig.ScrapeTimeout, pg.ScrapeInterval)
		} else if pg.ScrapeTimeout > pg.ScrapeInterval {
			l.errorf(tk.Line, "global scrape timeout greater than scrape interval (scrape_interval defaults to %s)", pg.ScrapeInterval)
			return false
		}
	}
	if k, _ := mappingKey(n, "evaluation_interval"); k == nil {
		pg.EvaluationInterval = DefaultGlobalConfig.EvaluationInterval
	}
	// As Prometheus' config.Load: external label values may name
	// environment variables.
	b := labels.NewScratchBuilder(0)
	pg.ExternalLabels.Range(func(lb labels.Label) {
		b.Add(lb.Name, os.Expand(lb.Value, func(s string) string {
			if s == "$" {
				return "$"
			}
			return os.Getenv(s)
		}))
	})
	if !b.Labels().IsEmpty() {
		pg.ExternalLabels = b.Labels()
	}
	*g = pg
	return true
}

// decodeScrapeConfigs decodes a list of scrape configs one item at a time,
// so that every broken item is reported, and validates each against global
// like Prometheus' Config.UnmarshalYAML. jobNames maps the job names seen so
// far to where they were defined.
func (l *loader) decodeScrapeConfigs(key string, n *yaml3.Node, global promconfig.GlobalConfig, validate bool, jobNames map[string]string) ([]*promconfig.ScrapeConfig, []*yaml3.Node) {
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml3.SequenceNode {
		l.errorf(n.Line, "%s must be a list of scrape configs", key)
		return nil, nil
	}
	var (
		scs   []*promconfig.ScrapeConfig
		nodes []*yaml3.Node
	)
	for _, item := range n.Content {
		item = deref(item)
		if isNull(item) {
			l.errorf(item.Line, "empty or null scrape config section")
			continue
		}
		sc := &promconfig.ScrapeConfig{}
		if !l.decode(item, sc) {
			continue
		}
		jobLine := keyLine(item, "job_name")
		if first, dup := jobNames[sc.JobName]; dup {
			l.errorf(jobLine, "found multiple scrape configs with job name %q (first at %s)", sc.JobName, first)
			continue
		}
		jobNames[sc.JobName] = fmt.Sprintf("%s:%d", l.file, jobLine)
		if validate {
			if err := sc.Validate(global); err != nil {
				l.errorf(locate(item, err.Error()), "%v", err)
				continue
			}
		}
		scs = append(scs, sc)
		nodes = append(nodes, item)
	}
	return scs, nodes
}

// decodePaths decodes a list of file patterns such as rule_files and
// returns them with their lines.
func (l *loader) decodePaths(key string, n *yaml3.Node, what string) ([]string, []int) {
	items := l.stringList(key, n)
	var (
		paths []string
		lines []int
	)
	for _, it := range items {
		if !patRulePath.MatchString(it.Value) {
			l.errorf(it.Line, "invalid %s path %q: a glob (*) may only appear in the last path element", what, it.Value)
			continue
		}
		paths = append(paths, it.Value)
		lines = append(lines, it.Line)
	}
	return paths, lines
}

// decodeRulePacks decodes rule_packs and returns them with their lines.
// Which packs exist is the rules stage's to say: `appliance check` and the
// command's loading check the names against rules.PackNames.
func (l *loader) decodeRulePacks(n *yaml3.Node) ([]string, []int) {
	var (
		packs []string
		lines []int
	)
	for _, it := range l.stringList("rule_packs", n) {
		if slices.Contains(packs, it.Value) {
			l.errorf(it.Line, "rule pack %q is listed twice", it.Value)
			continue
		}
		packs = append(packs, it.Value)
		lines = append(lines, it.Line)
	}
	return packs, lines
}

// stringList returns the items of a list of strings.
func (l *loader) stringList(key string, n *yaml3.Node) []*yaml3.Node {
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml3.SequenceNode {
		l.errorf(n.Line, "%s must be a list of strings", key)
		return nil
	}
	var items []*yaml3.Node
	for _, it := range n.Content {
		it = deref(it)
		if it.Kind != yaml3.ScalarNode || isNull(it) {
			l.errorf(it.Line, "%s: every item must be a string", key)
			continue
		}
		items = append(items, it)
	}
	return items
}

// setDirectory resolves relative paths against dir, as Prometheus'
// Config.SetDirectory.
func (c *Config) setDirectory(dir string) {
	c.Global.SetDirectory(dir)
	for i, f := range c.RuleFiles {
		c.RuleFiles[i] = commoncfg.JoinDir(dir, f)
	}
	for i, f := range c.ScrapeConfigFiles {
		c.ScrapeConfigFiles[i] = commoncfg.JoinDir(dir, f)
	}
	for _, sc := range c.ScrapeConfigs {
		sc.SetDirectory(dir)
	}
	for _, p := range c.Probes {
		p.SetDirectory(dir)
	}
	if c.Web.TLSServerConfig != nil {
		c.Web.TLSServerConfig.setDirectory(dir)
	}
	c.UI.setDirectory(dir)
	for i, f := range c.Alerting.Templates.Files {
		c.Alerting.Templates.Files[i] = commoncfg.JoinDir(dir, f)
	}
	for _, am := range c.Alerting.Alertmanagers {
		am.SetDirectory(dir)
	}
	for _, n := range c.Alerting.allNotifierConfigs() {
		if n.HTTPConfig != nil {
			n.HTTPConfig.SetDirectory(dir)
		}
	}
	for _, r := range c.RemoteRead {
		r.SetDirectory(dir)
	}
	for _, r := range c.RemoteWrite {
		if r != nil {
			r.SetDirectory(dir)
		}
	}
	if r := c.Storage.RemoteQuery; r != nil {
		r.HTTPClientConfig.SetDirectory(dir)
	}
}

// String returns the configuration as YAML with every secret (passwords,
// tokens, password hashes) printed as <secret>, for /api/v1/status/config.
func (c *Config) String() string {
	b, err := yaml2.Marshal(c)
	if err != nil {
		return fmt.Sprintf("<error creating config string: %v>", err)
	}
	return RedactURLPasswords(string(b))
}

// PrometheusConfig returns a Prometheus configuration holding the global
// section, scrape configs, scrape config files and rule files, for
// Prometheus' scrape manager and its /api/v1 handlers. It shares the scrape
// configs with c. Its GetScrapeConfigs works: it is built on a configuration
// that Prometheus' own Load marked as loaded.
func (c *Config) PrometheusConfig() *promconfig.Config {
	pc, err := promconfig.Load("", slog.New(slog.DiscardHandler))
	if err != nil {
		// Load of an empty document cannot fail; keep a usable value
		// if a future version disagrees.
		pc = &promconfig.Config{}
	}
	pc.GlobalConfig = c.Global
	pc.ScrapeConfigs = c.ScrapeConfigs
	pc.ScrapeConfigFiles = c.ScrapeConfigFiles
	pc.RuleFiles = c.RuleFiles
	return pc
}

// suggest returns the candidate at most two edits from s, if any.
func suggest(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
