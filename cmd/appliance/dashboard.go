package main

import (
	"github.com/aiserve/appliance/ui/dashboard"
)

// probeTargets lists the configured probes for the dashboard to match them
// to services by URL; auto-detected probes match by their names
// (<job>-<port>, see dashboard.Discover).
func (a *appliance) probeTargets() []dashboard.ProbeTarget {
	return dashboard.ProbeTargetsOf(a.cfg.Load().Probes)
}
