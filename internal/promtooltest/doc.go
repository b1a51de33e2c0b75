// Package promtooltest gives tests Prometheus' promtool, built from the Go
// module proxy at the version the benchmarks use
// (harness.PrometheusVersion) into bench/.bin, where later runs find it.
//
// # Caveats
//
// The first build takes about 5 minutes on 2 cores. Where it fails (no
// module proxy), a test skips, except under CI=true, where it fails: a
// test needing an external tool must not pass without it.
package promtooltest
