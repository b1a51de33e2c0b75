package slo

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/aiserve/appliance/config"
)

// Status is one SLO (for one value of its by labels) now: what the /slo
// page lists, sorted by budget left.
type Status struct {
	SLO       string            `json:"slo"`
	Service   string            `json:"service"`
	Kind      string            `json:"kind"`
	Labels    map[string]string `json:"labels"`
	Objective float64           `json:"objective"`
	Window    string            `json:"window"`
	// Attainment and BudgetLeft over the SLO's window ending now; nil
	// without traffic.
	Attainment *float64 `json:"attainment"`
	BudgetLeft *float64 `json:"budget_left"`
	// BurnRates per recorded window ("5m" ... "3d"): the error ratio over
	// the window divided by the error budget (1 − objective); 1 spends
	// the budget exactly over the SLO window.
	BurnRates map[string]float64 `json:"burn_rates"`
	// Alerts are the burn-rate conditions of this SLO with their factor.
	Alerts []StatusAlert `json:"alerts"`
}

// StatusAlert is one multi-window condition.
type StatusAlert struct {
	Alert    string  `json:"alert"`
	Severity string  `json:"severity"`
	Long     string  `json:"long"`
	Short    string  `json:"short"`
	Factor   float64 `json:"factor"`
}

// Statuses computes every SLO's status at now: attainment and budget
// from the SLIs over the window (through the tiers), burn rates from the
// recording rules' latest values.
func Statuses(ctx context.Context, src Source, slos []*config.SLOConfig, now time.Time) ([]Status, error) {
	out := []Status{}
	for _, s := range slos {
		window := time.Duration(s.Window)
		d, err := spanData(ctx, src, s, now.Add(-window), now)
		if err != nil {
			return nil, fmt.Errorf("slo %s: %w", s.Name, err)
		}
		var alerts []StatusAlert
		for _, bw := range BurnWindows(window) {
			name := AlertFast
			if bw.Severity == "P1" {
				name = AlertSlow
			}
			alerts = append(alerts, StatusAlert{Alert: name, Severity: bw.Severity, Long: promDuration(bw.Long), Short: promDuration(bw.Short), Factor: round(bw.Factor(window), 4)})
		}
		byKey := map[string]*Status{}
		get := func(k string, lbls map[string]string) *Status {
			st := byKey[k]
			if st == nil {
				st = &Status{SLO: s.Name, Service: s.Service, Kind: s.Kind, Labels: lbls, Objective: float64(s.Objective),
					Window: Days(window), BurnRates: map[string]float64{}, Alerts: alerts}
				byKey[k] = st
			}
			return st
		}
		for k, total := range d.total {
			st := get(k, d.lbls[k])
			st.Attainment = ratio(d.good[k], total)
			if total > 0 {
				left := 1 - (total-d.good[k])/((1-float64(s.Objective))*total)
				st.BudgetLeft = &left
			}
		}
		budget := 1 - float64(s.Objective)
		for _, w := range ratioWindows {
			ss, err := src.Instant(ctx, fmt.Sprintf("%s%s{%s=%q}", ErrorRatioPrefix, promDuration(w), SLOLabel, s.Name), now)
			if err != nil {
				return nil, fmt.Errorf("slo %s: %w", s.Name, err)
			}
			for _, smp := range ss {
				g := map[string]string{}
				for _, l := range s.By {
					g[l] = smp.Labels[l]
				}
				if math.IsNaN(smp.Value) {
					continue
				}
				get(labelKey(g), g).BurnRates[promDuration(w)] = smp.Value / budget
			}
		}
		for _, st := range byKey {
			out = append(out, *st)
		}
	}
	left := func(s Status) float64 {
		if s.BudgetLeft == nil {
			return math.Inf(1)
		}
		return *s.BudgetLeft
	}
	slices.SortFunc(out, func(a, b Status) int {
		return cmp.Or(cmp.Compare(left(a), left(b)), cmp.Compare(a.SLO, b.SLO), cmp.Compare(labelKey(a.Labels), labelKey(b.Labels)))
	})
	return out, nil
}
