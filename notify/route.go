package notify

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/aiserve/appliance/config"
)

// Defaults of Alertmanager's root route, used where the tree leaves a
// timing unset.
const (
	defaultGroupWait      = 30 * time.Second
	defaultGroupInterval  = 5 * time.Minute
	defaultRepeatInterval = 4 * time.Hour
)

// route is a node of the route tree with everything inherited resolved.
type route struct {
	id                  string // position in the tree, "0", "0.1", ...: part of the group key
	amKey               string // Alertmanager's route key: {}, {}/{matchers}, ...
	receiver            string
	matchers            config.Matchers
	cont                bool
	groupBy             map[model.LabelName]bool
	groupByAll          bool
	groupWait           time.Duration
	groupInterval       time.Duration
	repeatInterval      time.Duration
	muteTimeIntervals   []string
	activeTimeIntervals []string
	digest              bool
	routes              []*route
}

// newRoute resolves r below parent (nil for the root).
func newRoute(r *config.Route, parent *route, id string) *route {
	n := &route{id: id, matchers: r.Matchers, cont: r.Continue, digest: r.Digest}
	n.amKey = "{" + n.matcherString() + "}"
	if parent != nil {
		n.amKey = parent.amKey + "/" + n.amKey
	}
	if parent == nil {
		n.groupWait, n.groupInterval, n.repeatInterval = defaultGroupWait, defaultGroupInterval, defaultRepeatInterval
		n.groupBy = map[model.LabelName]bool{}
	} else {
		n.receiver = parent.receiver
		n.groupBy, n.groupByAll = parent.groupBy, parent.groupByAll
		n.groupWait, n.groupInterval, n.repeatInterval = parent.groupWait, parent.groupInterval, parent.repeatInterval
		n.muteTimeIntervals, n.activeTimeIntervals = parent.muteTimeIntervals, parent.activeTimeIntervals
		n.digest = n.digest || parent.digest
	}
	if r.Receiver != "" {
		n.receiver = r.Receiver
	}
	if r.GroupBy != nil {
		n.groupBy = map[model.LabelName]bool{}
		n.groupByAll = slices.Contains(r.GroupBy, "...")
		for _, l := range r.GroupBy {
			n.groupBy[model.LabelName(l)] = true
		}
	}
	if r.GroupWait != nil {
		n.groupWait = time.Duration(*r.GroupWait)
	}
	if r.GroupInterval != nil {
		n.groupInterval = time.Duration(*r.GroupInterval)
	}
	if r.RepeatInterval != nil {
		n.repeatInterval = time.Duration(*r.RepeatInterval)
	}
	if r.MuteTimeIntervals != nil {
		n.muteTimeIntervals = r.MuteTimeIntervals
	}
	if r.ActiveTimeIntervals != nil {
		n.activeTimeIntervals = r.ActiveTimeIntervals
	}
	for i, sub := range r.Routes {
		n.routes = append(n.routes, newRoute(sub, n, fmt.Sprintf("%s.%d", id, i)))
	}
	return n
}

// match returns the routes lset goes to, as Alertmanager does: the
// deepest matching routes, continuing to siblings where continue is set;
// the node itself when no child matches.
func (r *route) match(lset model.LabelSet) []*route {
	if !r.matchers.Matches(lset) {
		return nil
	}
	var all []*route
	for _, c := range r.routes {
		m := c.match(lset)
		all = append(all, m...)
		if m != nil && !c.cont {
			break
		}
	}
	if len(all) == 0 {
		all = append(all, r)
	}
	return all
}

// groupLabels returns the labels of lset the route groups by.
func (r *route) groupLabels(lset model.LabelSet) model.LabelSet {
	if r.groupByAll {
		return lset.Clone()
	}
	g := model.LabelSet{}
	for ln, lv := range lset {
		if r.groupBy[ln] {
			g[ln] = lv
		}
	}
	return g
}

// groupKey names an aggregation group: the route's position and matchers
// and the group labels. The position keeps apart the groups of sibling
// routes with the same matchers.
func (r *route) groupKey(gl model.LabelSet) string {
	return fmt.Sprintf("%s{%s}:%s", r.id, r.matcherString(), gl.String())
}

// alertmanagerGroupKey is the group key as Alertmanager writes it in its
// webhook payload: the route key ({} for the root, {}/{matchers} below
// it) and the group labels.
func (r *route) alertmanagerGroupKey(gl model.LabelSet) string {
	return r.amKey + ":" + gl.String()
}

func (r *route) matcherString() string {
	ms := make([]string, 0, len(r.matchers))
	for _, m := range r.matchers {
		ms = append(ms, m.String())
	}
	return strings.Join(ms, ",")
}
