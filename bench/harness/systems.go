package harness

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
)

// Versions of the anchors every benchmark compares the appliance with
// (DESIGN.md). Bumping one rebuilds it on the next run of any benchmark
// ([GoInstall] checks the version built into the binary).
const (
	PrometheusVersion      = "v0.316.0"
	VictoriaMetricsVersion = "v1.151.0"
	AlertmanagerVersion    = "v0.28.1"
	// The exporters of the stack a user would run instead of the
	// appliance on one box (bench/ingest -small-box).
	NodeExporterVersion     = "v1.9.1"
	BlackboxExporterVersion = "v0.28.0"
)

// System is a system under test as the scraping benchmarks run it: a
// binary built on demand, started with a scrape config, a fresh data dir
// and a loopback listen address, ready once ReadyPath answers 200 OK.
//
// A benchmark that needs more about each system (which counter to read, how
// to write its config) defines its own type embedding System, and so
// satisfies [Contender].
type System struct {
	Name  string // as in -only
	Title string // column header in reports

	// Build returns the path of the binary, building it into binDir if
	// needed; root is the module root. The build's output goes to log.
	Build func(ctx context.Context, root, binDir string, log io.Writer) (string, error)
	// Args returns the command line for a config file, a fresh data dir
	// and a listen address.
	Args func(config, dataDir, addr string) []string
	// ReadyPath answers 200 OK once the system serves queries.
	ReadyPath string
}

// Base returns s itself; it makes System and every type that embeds it a
// [Contender].
func (s System) Base() System { return s }

// Contender is a benchmark's own description of a system under test: a
// struct embedding [System], with the fields only that benchmark needs.
type Contender interface {
	Base() System
}

// Prometheus scrapes with the config file it is given and stores in a
// fresh TSDB.
var Prometheus = System{
	Name:  "prometheus",
	Title: "Prometheus " + PrometheusVersion,
	Build: goInstall("github.com/prometheus/prometheus/cmd/prometheus", PrometheusVersion),
	Args: func(config, dataDir, addr string) []string {
		return []string{
			"--config.file=" + config,
			"--storage.tsdb.path=" + dataDir,
			"--web.listen-address=" + addr,
		}
	},
	ReadyPath: "/-/ready",
}

// VictoriaMetrics is the single-node server scraping with
// -promscrape.config, which reads Prometheus' config syntax.
var VictoriaMetrics = System{
	Name:  "victoriametrics",
	Title: "VictoriaMetrics " + VictoriaMetricsVersion,
	Build: goInstall("github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics", VictoriaMetricsVersion),
	Args: func(config, dataDir, addr string) []string {
		return []string{
			"-promscrape.config=" + config,
			"-storageDataPath=" + dataDir,
			"-httpListenAddr=" + addr,
			// The rollup result cache would answer repeats of the same
			// query from memory; Prometheus and the appliance have no
			// such cache, so time every run from storage.
			"-search.disableCache",
		}
	},
	ReadyPath: "/health",
}

// Alertmanager receives Prometheus' alerts in the benchmarks that time
// notifications; clustering is off (a single instance), so it sends as
// soon as its route allows instead of waiting for gossip to settle.
var Alertmanager = System{
	Name:  "alertmanager",
	Title: "Alertmanager " + AlertmanagerVersion,
	Build: goInstall("github.com/prometheus/alertmanager/cmd/alertmanager", AlertmanagerVersion),
	Args: func(config, dataDir, addr string) []string {
		return []string{
			"--config.file=" + config,
			"--storage.path=" + dataDir,
			"--web.listen-address=" + addr,
			"--cluster.listen-address=",
		}
	},
	ReadyPath: "/-/ready",
}

// NodeExporter serves the host's readings; the appliance reads the same
// from /proc and /sys itself (collectors).
var NodeExporter = System{
	Name:  "node_exporter",
	Title: "node_exporter " + NodeExporterVersion,
	Build: goInstall("github.com/prometheus/node_exporter", NodeExporterVersion),
	Args: func(_, _, addr string) []string {
		return []string{"--web.listen-address=" + addr}
	},
	ReadyPath: "/metrics",
}

// BlackboxExporter runs Prometheus' probes; the appliance has its own.
// The module proxy refuses the module's version list, which `go install
// pkg@version` reads (for deprecations), so it is built with
// [GoBuildInModule].
var BlackboxExporter = System{
	Name:  "blackbox_exporter",
	Title: "blackbox_exporter " + BlackboxExporterVersion,
	Build: func(ctx context.Context, _, binDir string, log io.Writer) (string, error) {
		return GoBuildInModule(ctx, binDir, "github.com/prometheus/blackbox_exporter", BlackboxExporterVersion, log)
	},
	Args: func(config, _, addr string) []string {
		return []string{"--config.file=" + config, "--web.listen-address=" + addr}
	},
	ReadyPath: "/-/ready",
}

// Appliance is built from ./cmd/appliance of this module into
// bench/.bin/appliance on every run (the go command's cache makes that
// cheap), so it always measures the working tree.
var Appliance = System{
	Name:  "appliance",
	Title: "appliance",
	Build: func(ctx context.Context, root, binDir string, log io.Writer) (string, error) {
		bin := filepath.Join(binDir, "appliance")
		if err := GoBuild(ctx, root, "./cmd/appliance", bin, log); err != nil {
			return "", fmt.Errorf("build the appliance: %w", err)
		}
		return bin, nil
	},
	Args: func(config, dataDir, addr string) []string {
		return []string{"run", "--config", config, "--data", dataDir, "--listen", addr}
	},
	ReadyPath: "/-/ready",
}

// goInstall is the Build of an anchor: [GoInstall] of pkg at version.
func goInstall(pkg, version string) func(ctx context.Context, root, binDir string, log io.Writer) (string, error) {
	return func(ctx context.Context, _, binDir string, log io.Writer) (string, error) {
		return GoInstall(ctx, binDir, pkg, version, log)
	}
}

// SelectSystems parses an -only flag, system names separated by commas,
// into the systems of all it names, in the order given. An unknown name
// is an error that lists the known ones.
func SelectSystems[S Contender](list string, all []S) ([]S, error) {
	var out []S
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(all, func(s S) bool { return s.Base().Name == name })
		if i < 0 {
			known := make([]string, len(all))
			for j, s := range all {
				known[j] = s.Base().Name
			}
			return nil, fmt.Errorf("-only: unknown system %q: want %s", name, orList(known))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// orList joins names as prose: "a", "a or b", "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
