package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/aiserve/appliance/rules"
	"github.com/aiserve/appliance/rules/unittest"
)

// cmdTest is `appliance test rules FILE...`: promtool's rule unit tests
// (package unittest), with promtool's output and exit status.
func cmdTest(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "rules" {
		fmt.Fprintln(stderr, "usage: appliance test rules [--run REGEX] FILE...")
		return 2
	}
	fs := flag.NewFlagSet("test rules", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: appliance test rules [--run REGEX] FILE...\n\n"+
			"Runs rule unit tests in promtool's format (promtool test rules), with the\n"+
			"appliance's rule extensions and a test file's rule_packs. Exit status 0\n"+
			"when every test passed, 1 otherwise.\n\n")
		fs.PrintDefaults()
	}
	var run []string
	fs.Func("run", "run only the test groups whose name matches this regular expression (repeatable)", func(s string) error {
		run = append(run, s)
		return nil
	})
	ignore := fs.Bool("ignore-unknown-fields", false, "accept unknown fields in plain rule files (promtool's flag)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	opts := unittest.Options{Stdout: stdout, Stderr: stderr, Pack: rules.Pack, IgnoreUnknownFields: *ignore}
	if len(run) > 0 {
		re, err := regexp.Compile(strings.Join(run, "|"))
		if err != nil {
			fmt.Fprintln(stderr, "appliance test rules: --run:", err)
			return 2
		}
		opts.Run = re
	}
	return unittest.Run(opts, fs.Args()...)
}

// cmdRules is `appliance rules export`: the rules the appliance loads for
// a config (rule files, packs, the SLOs' generated groups and the warm-up
// group) as plain Prometheus rule files, the extensions compiled to the
// PromQL the appliance evaluates.
func cmdRules(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "export" {
		fmt.Fprintln(stderr, "usage: appliance rules export [--config FILE] [--out DIR]")
		return 2
	}
	fs := flag.NewFlagSet("rules export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgFile := fs.String("config", "", "config file (default: the embedded default config)")
	outDir := fs.String("out", "", "write one rule file per source into this directory instead of one file to standard output")
	addPrometheusAliases(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	cfg, err := loadConfig(runFlags{config: *cfgFile})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	files, err := rules.PrometheusRuleFiles(rulesConfig(cfg))
	if err != nil {
		fmt.Fprintln(stderr, "appliance rules export:", err)
		return 1
	}
	if *outDir != "" {
		return exportDir(files, *outDir, stdout, stderr)
	}
	// One file: the groups of every source, each source named in a comment.
	// Prometheus requires group names unique within a file; the sources'
	// names are told apart by the source's name when two collide.
	seen := map[string]bool{}
	fmt.Fprintln(stdout, "# Exported by `appliance rules export`: plain Prometheus rules.")
	fmt.Fprintln(stdout, "groups:")
	for _, f := range files {
		for _, g := range f.Groups.Groups {
			if seen[g.Name] {
				g.Name = g.Name + " (" + f.Source + ")"
			}
			seen[g.Name] = true
			data, err := yaml.Marshal([]any{g})
			if err != nil {
				fmt.Fprintln(stderr, "appliance rules export:", err)
				return 1
			}
			fmt.Fprintf(stdout, "  # source: %s\n", f.Source)
			for _, line := range strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n") {
				fmt.Fprint(stdout, "  "+line)
			}
			fmt.Fprintln(stdout)
		}
	}
	return 0
}

func exportDir(files []rules.ExportedFile, dir string, stdout, stderr io.Writer) int {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(stderr, "appliance rules export:", err)
		return 1
	}
	for _, f := range files {
		data, err := yaml.Marshal(&f.Groups)
		if err != nil {
			fmt.Fprintln(stderr, "appliance rules export:", err)
			return 1
		}
		name := exportName(f.Source)
		header := fmt.Sprintf("# Exported by `appliance rules export` from %s: plain Prometheus rules.\n", f.Source)
		if err := os.WriteFile(filepath.Join(dir, name), append([]byte(header), data...), 0o644); err != nil {
			fmt.Fprintln(stderr, "appliance rules export:", err)
			return 1
		}
		fmt.Fprintln(stdout, filepath.Join(dir, name))
	}
	return 0
}

// exportName is a file name for a source: "pack:vllm" is pack-vllm.yml,
// "rules/host.yml" is host.yml.
func exportName(source string) string {
	base := filepath.Base(source)
	base = strings.TrimSuffix(strings.TrimSuffix(base, ".yml"), ".yaml")
	base = strings.NewReplacer(":", "-", "/", "-").Replace(base)
	if strings.Contains(source, ":") && !strings.Contains(source, "/") {
		base = strings.NewReplacer(":", "-").Replace(source)
	}
	return base + ".yml"
}
