package main

import (
	"flag"
	"fmt"
	"strings"
)

// prometheusFlags are Prometheus' names for the appliance's own flags:
// each is registered as a second name of the same flag wherever the
// appliance's flag exists, so a systemd unit or a habit written for
// Prometheus (`--config.file=prometheus.yml`) works unchanged. --log.level
// and --log.format are the same name in both; --log.format also takes
// Prometheus' value logfmt (see newLogger).
var prometheusFlags = []struct{ alias, name string }{
	{"config.file", "config"},
	{"web.listen-address", "listen"},
	{"storage.tsdb.path", "data"},
}

// addPrometheusAliases registers the aliases of the flags fs has. Call it
// after the flags are defined.
func addPrometheusAliases(fs *flag.FlagSet) {
	for _, a := range prometheusFlags {
		f := fs.Lookup(a.name)
		if f == nil || fs.Lookup(a.alias) != nil {
			continue
		}
		fs.Var(f.Value, a.alias, fmt.Sprintf("Prometheus' name for --%s", a.name))
	}
}

// isPrometheusStyleStart reports whether args start with a flag rather
// than a command: `appliance --config.file=prometheus.yml` runs the
// appliance, as `prometheus --config.file=...` runs Prometheus.
func isPrometheusStyleStart(args []string) bool {
	if len(args) == 0 || !strings.HasPrefix(args[0], "-") {
		return false
	}
	switch strings.TrimLeft(args[0], "-") {
	case "h", "help", "version":
		return false
	}
	return true
}
