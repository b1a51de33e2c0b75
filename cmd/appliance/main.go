// Command appliance is the monitoring appliance for AI model serving: one
// binary that scrapes model servers, stores the samples and answers PromQL
// through Prometheus' HTTP API.
//
// Usage:
//
//	appliance run     [--config FILE] [--data DIR] [--listen ADDR]
//	appliance check   --config FILE
//	appliance demo    [--listen ADDR] [--data DIR] [--instances N] [--base-port P]
//	appliance notify test --receiver NAME [--config FILE]
//	appliance report  [--week W] [--format html|md|json] [--out FILE] [--config FILE] [--data DIR | --url URL]
//	appliance test rules FILE...
//	appliance rules export [--config FILE]
//	appliance version
//
// run also takes Prometheus' flag names (--config.file,
// --web.listen-address, --storage.tsdb.path, --log.format=logfmt; see
// flags.go), and `appliance --config.file=...` without a command runs.
//
// Flags live only here; packages take options structs. VictoriaMetrics'
// library registers its own flags on flag.CommandLine at init: the appliance
// never parses flag.CommandLine, so none of them reach this CLI.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() { os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = `appliance: a monitoring appliance for AI model serving

Usage:
  appliance run     [--config FILE] [--data DIR] [--listen ADDR]   run the appliance
  appliance check   --config FILE                                  validate a config and its rule files
  appliance demo    [--listen ADDR] [--data DIR] [--instances N]   simulated vLLM fleet plus the appliance
  appliance notify test --receiver NAME [--config FILE]            send a test notification
  appliance report  [--week 2026-W48] [--format html|md|json]      write the weekly SLO report
  appliance test rules FILE...                                     run rule unit tests (promtool's format)
  appliance rules export [--config FILE]                           print the loaded rules as plain Prometheus rule files
  appliance version                                                print the version

run takes Prometheus' flag names too: --config.file, --web.listen-address,
--storage.tsdb.path, --log.level, --log.format=logfmt|json; flags without a
command run the appliance (appliance --config.file=prometheus.yml).

Run "appliance COMMAND --help" for a command's flags.
`

func runMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if isPrometheusStyleStart(args) {
		return cmdRun(args, stdout, stderr)
	}
	switch args[0] {
	case "run":
		return cmdRun(args[1:], stdout, stderr)
	case "check":
		return cmdCheck(args[1:], stdout, stderr)
	case "demo":
		return cmdDemo(args[1:], stdout, stderr)
	case "notify":
		return cmdNotify(args[1:], stdout, stderr)
	case "report":
		return cmdReport(args[1:], stdout, stderr)
	case "test":
		return cmdTest(args[1:], stdout, stderr)
	case "rules":
		return cmdRules(args[1:], stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, versionString())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "appliance: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}
