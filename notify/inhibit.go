package notify

import (
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/aiserve/appliance/config"
)

// inhibitor applies inhibit rules against the alerts of the store. As in
// Alertmanager, each rule indexes the alerts its source matchers match by
// the values of its equal labels, so that checking an alert looks at the
// sources with its own values only: O(rules) for an alert, not O(alerts).
// It is changed with the notifier's lock held for writing and read with it
// held for reading.
type inhibitor struct {
	rules []*inhibitRule
}

type inhibitRule struct {
	*config.InhibitRule
	// sources holds the alerts the source matchers match (resolved ones
	// too; the check skips them) by equalKey.
	sources map[string]map[model.Fingerprint]struct{}
}

func newInhibitor(rules []*config.InhibitRule, alerts map[model.Fingerprint]*alert) *inhibitor {
	in := &inhibitor{}
	for _, r := range rules {
		in.rules = append(in.rules, &inhibitRule{InhibitRule: r, sources: map[string]map[model.Fingerprint]struct{}{}})
	}
	for fp, a := range alerts {
		in.observe(fp, a.Labels)
	}
	return in
}

// equalKey is the values of the rule's equal labels in lset (a missing
// label is the empty value, as in Alertmanager).
func (r *inhibitRule) equalKey(lset model.LabelSet) string {
	var b strings.Builder
	for _, l := range r.Equal {
		b.WriteString(string(lset[model.LabelName(l)]))
		b.WriteByte(0xff) // not in UTF-8
	}
	return b.String()
}

// observe indexes the alert fp with labels lset where it is a source.
func (in *inhibitor) observe(fp model.Fingerprint, lset model.LabelSet) {
	for _, r := range in.rules {
		if !r.SourceMatchers.Matches(lset) {
			continue
		}
		k := r.equalKey(lset)
		fps := r.sources[k]
		if fps == nil {
			fps = map[model.Fingerprint]struct{}{}
			r.sources[k] = fps
		}
		fps[fp] = struct{}{}
	}
}

// forget drops the alert fp with labels lset from the index.
func (in *inhibitor) forget(fp model.Fingerprint, lset model.LabelSet) {
	for _, r := range in.rules {
		k := r.equalKey(lset)
		if fps := r.sources[k]; fps != nil {
			delete(fps, fp)
			if len(fps) == 0 {
				delete(r.sources, k)
			}
		}
	}
}

// inhibitedBy returns the fingerprints of the firing alerts that inhibit
// lset, as Alertmanager decides it: a rule whose target matchers match lset
// and a firing alert (not lset itself) that its source matchers match with
// the same values of the equal labels. When lset matches both sides of a
// rule, alerts that also match both sides do not inhibit it, so that two
// alerts cannot mute each other.
func (in *inhibitor) inhibitedBy(lset model.LabelSet, fp model.Fingerprint, alerts map[model.Fingerprint]*alert, now time.Time) []string {
	var out []string
	in.each(lset, fp, alerts, now, func(sfp model.Fingerprint) bool {
		out = append(out, sfp.String())
		return true
	})
	sort.Strings(out)
	return out
}

// inhibited reports whether an alert inhibits lset; it stops at the first.
func (in *inhibitor) inhibited(lset model.LabelSet, fp model.Fingerprint, alerts map[model.Fingerprint]*alert, now time.Time) bool {
	found := false
	in.each(lset, fp, alerts, now, func(model.Fingerprint) bool {
		found = true
		return false
	})
	return found
}

// each calls f with the alerts that inhibit lset until f returns false.
func (in *inhibitor) each(lset model.LabelSet, fp model.Fingerprint, alerts map[model.Fingerprint]*alert, now time.Time, f func(model.Fingerprint) bool) {
	for _, r := range in.rules {
		if !r.TargetMatchers.Matches(lset) {
			continue
		}
		twoSided := r.SourceMatchers.Matches(lset)
		for sfp := range r.sources[r.equalKey(lset)] {
			a := alerts[sfp]
			if sfp == fp || a == nil || a.resolved(now) {
				continue
			}
			if twoSided && r.TargetMatchers.Matches(a.Labels) {
				continue
			}
			if !f(sfp) {
				return
			}
		}
	}
}
