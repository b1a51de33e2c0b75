package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	yaml3 "go.yaml.in/yaml/v3"
)

// SLO kinds.
const (
	SLOKindLatency      = "latency"
	SLOKindAvailability = "availability"
)

// SLOWindows are the rolling windows an SLO may have. The burn-rate
// factors of the SRE workbook are defined for a 30d window and scale to
// the others (slo/ does the scaling).
var SLOWindows = []model.Duration{
	model.Duration(7 * 24 * time.Hour),
	model.Duration(28 * 24 * time.Hour),
	model.Duration(30 * 24 * time.Hour),
}

// SLOConfig is one entry of the slos section. An SLOConfig returned by
// Load has its defaults applied and is valid as far as the file alone
// can tell; whether Threshold is a bucket bound of the histogram needs
// the data and is checked by package slo (appliance check calls it).
type SLOConfig struct {
	Name string `yaml:"name"`
	// Kind is latency (good = requests at or under Threshold, from a
	// histogram) or availability (from a probe, or from Good and Total).
	Kind string `yaml:"kind"`
	// Service names the service in the report; by default the job the
	// selector matches, else the probe, else the SLO's name.
	Service string `yaml:"service,omitempty"`

	// Latency SLOs: the histogram's base name (without _bucket), a label
	// selector such as {job="vllm"}, and the threshold in seconds,
	// written as a Go duration (1.5s, 150us) or a plain number of seconds.
	Histogram string  `yaml:"histogram,omitempty"`
	Selector  string  `yaml:"selector,omitempty"`
	Threshold Seconds `yaml:"threshold,omitempty"`

	// Availability SLOs: a probe's name, or good and total events: each a
	// counter's selector (the SLI is rate(good[w]) / rate(total[w])) or
	// an expression of rates with the window written [$window]; the SLO
	// sums each by its By labels.
	Probe string `yaml:"probe,omitempty"`
	Good  string `yaml:"good,omitempty"`
	Total string `yaml:"total,omitempty"`

	// By splits the SLO into one per value of these labels.
	By []string `yaml:"by,omitempty"`
	// Objective is the share of good events, written 99% or 0.99.
	Objective Ratio `yaml:"objective"`
	// Window is the rolling window of the error budget: 7d, 28d or 30d.
	Window model.Duration `yaml:"window"`
}

// DefaultSLOWindow is the window of an SLO that sets none: Pyrra's default,
// four whole weeks, so a week's report sees a quarter of it.
var DefaultSLOWindow = model.Duration(28 * 24 * time.Hour)

// UnmarshalYAML implements yaml.Unmarshaler; it applies the defaults and
// validates the SLO.
func (c *SLOConfig) UnmarshalYAML(unmarshal func(any) error) error {
	*c = SLOConfig{}
	type plain SLOConfig
	if err := unmarshal((*plain)(c)); err != nil {
		return err
	}
	return c.Validate()
}

// Validate applies the defaults and checks what the SLO says by itself.
func (c *SLOConfig) Validate() error {
	if c.Name == "" {
		return fieldErrorf([]string{"name"}, "slo: name is required")
	}
	if strings.ContainsAny(c.Name, " \t\n\"{}") {
		return fieldErrorf([]string{"name"}, "slo %q: a name may not contain spaces, quotes or braces (it names the rule group slo:%s)", c.Name, c.Name)
	}
	p := parser.NewParser(parser.Options{})
	switch c.Kind {
	case SLOKindLatency:
		if c.Histogram == "" {
			return fieldErrorf([]string{"kind"}, "slo %s: a latency SLO needs histogram (the name without _bucket)", c.Name)
		}
		if strings.HasSuffix(c.Histogram, "_bucket") || strings.HasSuffix(c.Histogram, "_count") {
			return fieldErrorf([]string{"histogram"}, "slo %s: histogram %q: give the name without _bucket or _count", c.Name, c.Histogram)
		}
		if !model.UTF8Validation.IsValidMetricName(c.Histogram) {
			return fieldErrorf([]string{"histogram"}, "slo %s: histogram %q is not a metric name", c.Name, c.Histogram)
		}
		if c.Threshold <= 0 {
			return fieldErrorf([]string{"kind"}, "slo %s: a latency SLO needs a threshold above 0 (e.g. 1.5s)", c.Name)
		}
		if c.Probe != "" || c.Good != "" || c.Total != "" {
			return fieldErrorf([]string{"kind"}, "slo %s: probe, good and total belong to availability SLOs", c.Name)
		}
		if c.Selector != "" {
			sel := c.Selector
			if !strings.HasPrefix(strings.TrimSpace(sel), "{") {
				return fieldErrorf([]string{"selector"}, "slo %s: selector %q must be label matchers in braces, e.g. {job=\"vllm\"}", c.Name, c.Selector)
			}
			if _, err := p.ParseMetricSelector(c.Histogram + "_bucket" + sel); err != nil {
				return fieldErrorf([]string{"selector"}, "slo %s: selector %q: %v", c.Name, c.Selector, err)
			}
		}
	case SLOKindAvailability:
		if c.Histogram != "" || c.Threshold != 0 {
			return fieldErrorf([]string{"kind"}, "slo %s: histogram and threshold belong to latency SLOs", c.Name)
		}
		if c.Selector != "" {
			return fieldErrorf([]string{"selector"}, "slo %s: selector belongs to latency SLOs; put the matchers in good and total", c.Name)
		}
		switch {
		case c.Probe != "" && (c.Good != "" || c.Total != ""):
			return fieldErrorf([]string{"probe"}, "slo %s: give either probe or good and total, not both", c.Name)
		case c.Probe == "" && (c.Good == "" || c.Total == ""):
			return fieldErrorf([]string{"kind"}, "slo %s: an availability SLO needs probe, or both good and total", c.Name)
		}
		for _, q := range []struct{ key, expr string }{{"good", c.Good}, {"total", c.Total}} {
			if q.expr == "" {
				continue
			}
			if _, err := p.ParseExpr(strings.ReplaceAll(q.expr, "$window", "5m")); err != nil {
				return fieldErrorf([]string{q.key}, "slo %s: %s: %v", c.Name, q.key, err)
			}
		}
	case "":
		return fieldErrorf([]string{"name"}, "slo %s: kind is required: latency or availability", c.Name)
	default:
		return fieldErrorf([]string{"kind"}, "slo %s: unknown kind %q; want latency or availability", c.Name, c.Kind)
	}
	for _, l := range c.By {
		if !model.UTF8Validation.IsValidLabelName(l) || l == "le" || l == model.MetricNameLabel {
			return fieldErrorf([]string{"by"}, "slo %s: by: %q is not a label an SLO can be split by", c.Name, l)
		}
	}
	if c.Objective == 0 {
		return fieldErrorf([]string{"name"}, "slo %s: objective is required (e.g. 99%%)", c.Name)
	}
	if c.Objective <= 0 || c.Objective >= 1 {
		return fieldErrorf([]string{"objective"}, "slo %s: objective %s must be above 0%% and below 100%%", c.Name, c.Objective)
	}
	if c.Window == 0 {
		c.Window = DefaultSLOWindow
	}
	ok := false
	for _, w := range SLOWindows {
		ok = ok || w == c.Window
	}
	if !ok {
		return fieldErrorf([]string{"window"}, "slo %s: window %s is not supported; use 7d, 28d or 30d", c.Name, c.Window)
	}
	if c.Service == "" {
		c.Service = c.defaultService()
	}
	return nil
}

// defaultService is the job the selector matches exactly, else the probe,
// else the name.
func (c *SLOConfig) defaultService() string {
	if c.Selector != "" {
		if ms, err := parser.NewParser(parser.Options{}).ParseMetricSelector(c.Selector); err == nil {
			for _, m := range ms {
				if m.Name == "job" && m.Type.String() == "=" {
					return m.Value
				}
			}
		}
	}
	if c.Probe != "" {
		return c.Probe
	}
	return c.Name
}

// Seconds is a duration in seconds as a float, so that thresholds below a
// millisecond (TGI's first bucket is 0.00015 s) keep every digit. It is
// written as a Go duration ("1.5s", "150us", "2m") or a plain number of
// seconds.
type Seconds float64

// ParseSeconds parses a Seconds value.
func ParseSeconds(s string) (Seconds, error) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		return Seconds(f), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: want e.g. 1.5s, 250ms or a number of seconds", s)
	}
	// A duration's text may carry more digits than nanoseconds do.
	num := strings.TrimRight(s, "abcdefghijklmnopqrstuvwxyzµ")
	unit := s[len(num):]
	if f, err := strconv.ParseFloat(num, 64); err == nil {
		scale := map[string]float64{"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
		if k, ok := scale[unit]; ok {
			return Seconds(f * k), nil
		}
	}
	return Seconds(d.Seconds()), nil
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (s *Seconds) UnmarshalYAML(unmarshal func(any) error) error {
	var str string
	if err := unmarshal(&str); err != nil {
		return err
	}
	v, err := ParseSeconds(str)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (s Seconds) MarshalYAML() (any, error) { return s.String(), nil }

func (s Seconds) String() string { return strconv.FormatFloat(float64(s), 'g', -1, 64) + "s" }

// Ratio is a share between 0 and 1, written as a percentage ("99.5%") or a
// number ("0.995").
type Ratio float64

// ParseRatio parses a Ratio value.
func ParseRatio(s string) (Ratio, error) {
	s = strings.TrimSpace(s)
	pct := strings.HasSuffix(s, "%")
	f, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(s, "%")), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("invalid ratio %q: want a percentage such as 99.5%% or a number such as 0.995", s)
	}
	if pct {
		f /= 100
	}
	return Ratio(f), nil
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (r *Ratio) UnmarshalYAML(unmarshal func(any) error) error {
	var str string
	if err := unmarshal(&str); err != nil {
		return err
	}
	v, err := ParseRatio(str)
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (r Ratio) MarshalYAML() (any, error) { return r.String(), nil }

// String prints the ratio as a percentage with as many digits as it has.
func (r Ratio) String() string {
	return strconv.FormatFloat(math.Round(float64(r)*1e10)/1e8, 'f', -1, 64) + "%"
}

// ReportsConfig is the reports section.
type ReportsConfig struct {
	Weekly *WeeklyReportConfig `yaml:"weekly,omitempty"`
}

// WeeklyReportConfig schedules the weekly SLO report: sent at At on Day
// in Timezone, about the ISO week that just ended, to Receivers.
type WeeklyReportConfig struct {
	Day       string   `yaml:"day"`
	At        string   `yaml:"at"`
	Timezone  string   `yaml:"timezone,omitempty"`
	Receivers []string `yaml:"receivers"`

	weekday  time.Weekday
	minute   int // minutes after midnight
	location *time.Location
}

// Weekly report defaults: Monday 09:00, in the box's zone (UTC when the
// box has none).
const (
	DefaultReportDay = "monday"
	DefaultReportAt  = "09:00"
)

var weekdays = map[string]time.Weekday{
	"sunday": time.Sunday, "monday": time.Monday, "tuesday": time.Tuesday, "wednesday": time.Wednesday,
	"thursday": time.Thursday, "friday": time.Friday, "saturday": time.Saturday,
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (c *WeeklyReportConfig) UnmarshalYAML(unmarshal func(any) error) error {
	*c = WeeklyReportConfig{}
	type plain WeeklyReportConfig
	if err := unmarshal((*plain)(c)); err != nil {
		return err
	}
	if c.Day == "" {
		c.Day = DefaultReportDay
	}
	if c.At == "" {
		c.At = DefaultReportAt
	}
	wd, ok := weekdays[strings.ToLower(c.Day)]
	if !ok {
		return fieldErrorf([]string{"weekly", "day"}, "reports: weekly: day %q is not a day of the week (monday ... sunday)", c.Day)
	}
	c.weekday = wd
	t, err := time.Parse("15:04", c.At)
	if err != nil {
		return fieldErrorf([]string{"weekly", "at"}, "reports: weekly: at %q is not a time of day HH:MM (24h), e.g. \"09:00\"", c.At)
	}
	c.minute = t.Hour()*60 + t.Minute()
	loc := time.Local
	if c.Timezone != "" {
		if loc, err = time.LoadLocation(c.Timezone); err != nil {
			return fieldErrorf([]string{"weekly", "timezone"}, "reports: weekly: timezone %q is not an IANA zone name (e.g. Asia/Shanghai, Europe/Berlin, UTC)", c.Timezone)
		}
	}
	c.location = loc
	if len(c.Receivers) == 0 {
		return fieldErrorf([]string{"weekly", "day"}, "reports: weekly: receivers is required: the receivers of alerting.receivers the report goes to")
	}
	return nil
}

// Weekday returns the day the report is sent.
func (c *WeeklyReportConfig) Weekday() time.Weekday { return c.weekday }

// Minute returns the time of day it is sent, in minutes after midnight.
func (c *WeeklyReportConfig) Minute() int { return c.minute }

// Location returns the zone of the schedule and of the report's weeks.
func (c *WeeklyReportConfig) Location() *time.Location {
	if c.location == nil {
		return time.UTC
	}
	return c.location
}

// decodeSLOs decodes the slos section item by item, so that every broken
// SLO is reported at its own line, and checks names are unique.
func (l *loader) decodeSLOs(n *yaml3.Node) []*SLOConfig {
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml3.SequenceNode {
		l.errorf(n.Line, "slos must be a list of SLOs")
		return nil
	}
	var out []*SLOConfig
	first := map[string]int{}
	for _, item := range n.Content {
		item = deref(item)
		s := &SLOConfig{}
		if !l.decode(item, s) {
			continue
		}
		line := keyLine(item, "name")
		if at, dup := first[s.Name]; dup {
			l.errorf(line, "slo name %q is used twice (first at line %d); every SLO needs its own name", s.Name, at)
			continue
		}
		first[s.Name] = line
		out = append(out, s)
	}
	return out
}

// checkSLOReferences checks what an SLO or report names in other
// sections: probes and receivers. root is the document's mapping.
func (l *loader) checkSLOReferences(root *yaml3.Node, cfg *Config, reportsOK bool) {
	probes := map[string]bool{}
	for _, p := range cfg.Probes {
		if p != nil {
			probes[p.Name] = true
		}
	}
	_, slos := mappingKey(root, "slos")
	for _, s := range cfg.SLOs {
		if s.Probe == "" || probes[s.Probe] {
			continue
		}
		line := 0
		if slos != nil {
			for _, item := range slos.Content {
				if _, v := mappingKey(item, "name"); v != nil && v.Value == s.Name {
					line = keyLine(item, "probe")
				}
			}
		}
		l.errorf(line, "slo %s: probe %q is not defined in probes", s.Name, s.Probe)
	}
	if cfg.Reports.Weekly == nil || !reportsOK {
		return
	}
	known := map[string]bool{}
	for _, r := range cfg.Alerting.Receivers {
		if r != nil {
			known[r.Name] = true
		}
	}
	_, reports := mappingKey(root, "reports")
	for _, name := range cfg.Reports.Weekly.Receivers {
		if known[name] {
			continue
		}
		l.errorf(keyLine(reports, "weekly", "receivers"), "reports: weekly: receiver %q is not defined in alerting.receivers", name)
	}
}

// SLOLine returns the line of key (such as "threshold") of SLOs[i], else
// of the SLO's item, or 0 when unknown; for the checks of package slo.
func (c *Config) SLOLine(i int, key string) int {
	if c.root == nil || i >= len(c.SLOs) {
		return 0
	}
	_, slos := mappingKey(c.root, "slos")
	if slos == nil {
		return 0
	}
	for _, item := range slos.Content {
		if _, v := mappingKey(item, "name"); v != nil && v.Value == c.SLOs[i].Name {
			return keyLine(item, key)
		}
	}
	return 0
}
