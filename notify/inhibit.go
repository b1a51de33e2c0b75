package notify

import (
	"sort"
	"time"

	"github.com/prometheus/common/model"

	"github.com/aiserve/appliance/config"
)

// inhibitor applies inhibit rules against the firing alerts of the store.
type inhibitor struct {
	rules []*config.InhibitRule
}

// inhibitedBy returns the fingerprints of the firing alerts that inhibit
// lset, as Alertmanager decides it: a rule whose target matchers match lset
// and a firing alert (not lset itself) that its source matchers match with
// the same values of the equal labels. When lset matches both sides of a
// rule, alerts that also match both sides do not inhibit it, so that two
// alerts cannot mute each other.
func (in *inhibitor) inhibitedBy(lset model.LabelSet, fp model.Fingerprint, alerts map[model.Fingerprint]*alert, now time.Time) []string {
	var out []string
	for _, r := range in.rules {
		if !r.TargetMatchers.Matches(lset) {
			continue
		}
		twoSided := r.SourceMatchers.Matches(lset)
		for sfp, a := range alerts {
			if sfp == fp || a.resolved(now) || !r.SourceMatchers.Matches(a.Labels) {
				continue
			}
			if twoSided && r.TargetMatchers.Matches(a.Labels) {
				continue
			}
			equal := true
			for _, l := range r.Equal {
				if a.Labels[model.LabelName(l)] != lset[model.LabelName(l)] {
					equal = false
					break
				}
			}
			if equal {
				out = append(out, sfp.String())
			}
		}
	}
	sort.Strings(out)
	return out
}
