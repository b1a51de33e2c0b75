package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// PriorityLabel is the label that routing reads: P0, P1 or P2, from the
// severity label through alerting.severity_map. Rules gain it when they
// are compiled and the notifier adds it to alerts that come without it.
const PriorityLabel = "priority"

// Priorities are the values of PriorityLabel, most urgent first.
var Priorities = []string{"P0", "P1", "P2"}

// DefaultSeverityMap is alerting.severity_map when the section sets none:
// the severities of the widely used public rule sets, and the priorities
// themselves. Entries the section sets are added to these or replace them.
var DefaultSeverityMap = map[string]string{
	"critical": "P0", "error": "P1", "warning": "P1", "info": "P2", "none": "P2",
	"P0": "P0", "P1": "P1", "P2": "P2",
}

// DefaultSeverity is alerting.default_severity when unset: the priority of
// a rule or alert without a severity label.
const DefaultSeverity = "P1"

// Severities maps a severity label to a priority (SeverityMap over
// DefaultSeverityMap) and says the priority of alerts without one.
type Severities struct {
	Map     map[string]string
	Default string
	// Labels are the labels read for the severity, the first one present.
	Labels []string
}

// DefaultSeverityLabels is alerting.severity_labels when unset.
var DefaultSeverityLabels = []string{"severity"}

// Of returns the severity of a label set (get looks a label up): the value
// of the first of Labels it has, and whether it has one. A priority label
// that already holds a priority is not a severity.
func (s Severities) Of(get func(string) (string, bool)) (string, bool) {
	labels := s.Labels
	if len(labels) == 0 {
		labels = DefaultSeverityLabels
	}
	for _, l := range labels {
		if v, ok := get(l); ok {
			return v, true
		}
	}
	return "", false
}

// ReadsPriority reports whether the priority label is one of the severity
// labels: its value then goes through the map too.
func (s Severities) ReadsPriority() bool { return slices.Contains(s.Labels, PriorityLabel) }

// KeepsPriority reports whether a label set whose priority label holds p
// keeps p as its priority: always, unless the priority label is also a
// severity label and p is not a priority (then p goes through the map).
func (s Severities) KeepsPriority(p string) bool {
	return !s.ReadsPriority() || slices.Contains(Priorities, p)
}

// Severities returns the severity map in effect for c.
func (c AlertingConfig) Severities() Severities {
	m := maps.Clone(DefaultSeverityMap)
	maps.Copy(m, c.SeverityMap)
	d := c.DefaultSeverity
	if d == "" {
		d = DefaultSeverity
	}
	ls := c.SeverityLabels
	if len(ls) == 0 {
		ls = DefaultSeverityLabels
	}
	return Severities{Map: m, Default: d, Labels: ls}
}

// Priority returns the priority of a severity ("" for none): the map's
// value, also for a severity written in another case ("Critical"); false
// when the map does not know it.
func (s Severities) Priority(severity string) (string, bool) {
	if severity == "" {
		return s.Default, true
	}
	if p, ok := s.Map[severity]; ok {
		return p, true
	}
	for k, p := range s.Map {
		if strings.EqualFold(k, severity) {
			return p, true
		}
	}
	return "", false
}

// Known lists the severities the map knows, sorted, for messages.
func (s Severities) Known() []string {
	return slices.Sorted(maps.Keys(s.Map))
}

// checkSeverities checks severity_map and default_severity.
func (c *AlertingConfig) checkSeverities() error {
	for _, k := range slices.Sorted(maps.Keys(c.SeverityMap)) {
		if !slices.Contains(Priorities, c.SeverityMap[k]) {
			return fieldErrorf([]string{"severity_map", k}, "severity_map %q: %q is not a priority; want P0, P1 or P2", k, c.SeverityMap[k])
		}
	}
	for _, l := range c.SeverityLabels {
		if !model.LabelName(l).IsValid() {
			return fieldErrorf([]string{"severity_labels"}, "severity_labels: invalid label name %q", l)
		}
	}
	if c.DefaultSeverity != "" && !slices.Contains(Priorities, c.DefaultSeverity) {
		return fieldErrorf([]string{"default_severity"}, "default_severity %q: want P0, P1 or P2", c.DefaultSeverity)
	}
	return nil
}

// RulesConfig is the rules section: defaults for the rule files.
type RulesConfig struct {
	// Warmup is the warm-up of the alerting rules of rule_files whose rule
	// and group set none (0: none, as in Prometheus). The embedded packs
	// keep their own warm-up.
	Warmup model.Duration `yaml:"warmup,omitempty"`
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (c *RulesConfig) UnmarshalYAML(unmarshal func(any) error) error {
	type plain RulesConfig
	if err := unmarshal((*plain)(c)); err != nil {
		return err
	}
	if time.Duration(c.Warmup) < 0 {
		return fmt.Errorf("rules warmup must not be negative")
	}
	return nil
}
