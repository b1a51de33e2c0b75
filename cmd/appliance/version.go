package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	apiv1 "github.com/prometheus/prometheus/web/api/v1"
)

// Set at build time: go build -ldflags "-X main.version=... -X main.revision=...".
var (
	version   = "0.1.0-dev"
	revision  = ""
	buildDate = ""
)

func buildRevision() string {
	if revision != "" {
		return revision
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}

func versionString() string {
	return fmt.Sprintf("appliance %s (revision %s, built %s, %s %s/%s)",
		version, buildRevision(), buildDate, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// prometheusModule is the module whose API, PromQL and rules the
// appliance serves.
const prometheusModule = "github.com/prometheus/prometheus"

// prometheusVersion is the Prometheus release of the module the binary
// was built with: module v0.316.0 is Prometheus 3.16.0. Clients that read
// buildinfo's version as a Prometheus version (Grafana picks the API
// features by it) see the API they talk to, not the appliance's own
// version, which buildinfo carries as applianceVersion.
func prometheusVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == prometheusModule {
				if v, ok := prometheusRelease(d.Version); ok {
					return v
				}
			}
		}
	}
	return "3.0.0"
}

// prometheusRelease maps a Prometheus Go module version (v0.MMP.F, e.g.
// v0.316.0) to its release (3.16.0): MMP is the major digit then the
// minor.
func prometheusRelease(modVersion string) (string, bool) {
	var mmp, patch int
	if _, err := fmt.Sscanf(modVersion, "v0.%d.%d", &mmp, &patch); err != nil || mmp < 100 {
		return "", false
	}
	return fmt.Sprintf("%d.%d.%d", mmp/100, mmp%100, patch), true
}

func buildInfo() apiv1.PrometheusVersion {
	return apiv1.PrometheusVersion{
		Version:   prometheusVersion(),
		Revision:  buildRevision(),
		Branch:    "main",
		BuildUser: "appliance",
		BuildDate: buildDate,
		GoVersion: runtime.Version(),
	}
}
