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

func buildInfo() apiv1.PrometheusVersion {
	return apiv1.PrometheusVersion{
		Version:   version,
		Revision:  buildRevision(),
		Branch:    "main",
		BuildUser: "appliance",
		BuildDate: buildDate,
		GoVersion: runtime.Version(),
	}
}
