package notify

import (
	"sort"

	"github.com/prometheus/common/model"
	yaml2 "go.yaml.in/yaml/v2"

	"github.com/aiserve/appliance/config"
)

// The config /api/v2/status shows must load as an Alertmanager config:
// amtool parses it (`amtool config routes`). These types are the part of
// Alertmanager's config the appliance shares: the route tree, inhibit
// rules and time intervals. Receivers are listed by name only, which keeps
// their secrets out and Alertmanager's loader content; a digest route is
// shown as a route to a receiver named "digest".

type amRoute struct {
	Receiver            string          `yaml:"receiver,omitempty"`
	GroupBy             []string        `yaml:"group_by,omitempty"`
	Matchers            config.Matchers `yaml:"matchers,omitempty"`
	Continue            bool            `yaml:"continue,omitempty"`
	GroupWait           *model.Duration `yaml:"group_wait,omitempty"`
	GroupInterval       *model.Duration `yaml:"group_interval,omitempty"`
	RepeatInterval      *model.Duration `yaml:"repeat_interval,omitempty"`
	MuteTimeIntervals   []string        `yaml:"mute_time_intervals,omitempty"`
	ActiveTimeIntervals []string        `yaml:"active_time_intervals,omitempty"`
	Routes              []*amRoute      `yaml:"routes,omitempty"`
}

type amConfig struct {
	Route         *amRoute               `yaml:"route"`
	InhibitRules  []*config.InhibitRule  `yaml:"inhibit_rules,omitempty"`
	Receivers     []map[string]string    `yaml:"receivers"`
	TimeIntervals []*config.TimeInterval `yaml:"time_intervals,omitempty"`
}

// blackhole names the root receiver when the root route has none (the
// default tree): Alertmanager requires one.
const blackhole = "blackhole"

// alertmanagerYAML renders c as an Alertmanager configuration.
func alertmanagerYAML(c config.AlertingConfig) string {
	names := map[string]bool{}
	for _, r := range c.Receivers {
		names[r.Name] = true
	}
	var conv func(r *config.Route, root bool) *amRoute
	conv = func(r *config.Route, root bool) *amRoute {
		out := &amRoute{
			Receiver: r.Receiver, GroupBy: r.GroupBy, Matchers: r.Matchers, Continue: r.Continue,
			GroupWait: r.GroupWait, GroupInterval: r.GroupInterval, RepeatInterval: r.RepeatInterval,
			MuteTimeIntervals: r.MuteTimeIntervals, ActiveTimeIntervals: r.ActiveTimeIntervals,
		}
		if r.Digest {
			out.Receiver = "digest"
		}
		if root && out.Receiver == "" {
			out.Receiver = blackhole
		}
		if out.Receiver != "" {
			names[out.Receiver] = true
		}
		for _, sub := range r.Routes {
			out.Routes = append(out.Routes, conv(sub, false))
		}
		return out
	}
	am := amConfig{Route: conv(c.Route, true), InhibitRules: c.InhibitRules, TimeIntervals: c.TimeIntervals}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		am.Receivers = append(am.Receivers, map[string]string{"name": n})
	}
	b, err := yaml2.Marshal(am)
	if err != nil {
		return ""
	}
	return string(b)
}
