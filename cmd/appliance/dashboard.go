package main

import (
	"github.com/aiserve/appliance/ui/dashboard"
)

// probeTargets lists the running probes, configured and auto-detected,
// for the dashboard to match them to services; without the probes part,
// the configured ones.
func (a *appliance) probeTargets() []dashboard.ProbeTarget {
	for _, p := range a.parts {
		if pp, ok := p.(*probesPart); ok {
			return dashboard.ProbeTargetsOf(pp.probes.Configs())
		}
	}
	return dashboard.ProbeTargetsOf(a.cfg.Load().Probes)
}
