package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/notify/message"
	"github.com/aiserve/appliance/query"
	"github.com/aiserve/appliance/rules"
	"github.com/aiserve/appliance/rules/rulefile"
)

// `appliance check` lives here, not in config, as promtool's checks live in
// the promtool command: config checks what it can on its own (config.Check)
// and this file asks each stage to check its share: the rules stage its
// rule files and pack names, the notifier its message templates. config
// imports no stage.

func cmdCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgFile := fs.String("config", "", "config file to check (required)")
	apiURL := fs.String("url", "", "also check SLO thresholds against the histograms of a running appliance at this URL")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	path := *cfgFile
	if path == "" && fs.NArg() == 1 {
		path = fs.Arg(0)
	}
	if path == "" {
		fmt.Fprintln(stderr, "appliance check: --config FILE is required")
		return 2
	}
	errs := checkConfig(path)
	if len(errs) == 0 && *apiURL != "" {
		// The data's bucket bounds, for histograms no known model
		// server has.
		if cfg, err := config.LoadFile(path); err == nil {
			errs = append(errs, sloBoundErrors(cfg, *apiURL)...)
		}
	}
	for _, err := range errs {
		fmt.Fprintln(stderr, err)
	}
	if cfg, _ := config.Check(path); cfg != nil {
		// What the file has that the appliance maps or ignores.
		for _, w := range cfg.Warnings() {
			fmt.Fprintln(stderr, w)
		}
	}
	for _, w := range ruleFileWarnings(path) {
		fmt.Fprintln(stderr, w)
	}
	if len(errs) > 0 {
		fmt.Fprintf(stderr, "FAILED: %d error(s) in %s\n", len(errs), path)
		return 1
	}
	fmt.Fprintf(stdout, "SUCCESS: %s is valid\n", path)
	printGeneratedRules(stdout, path)
	return 0
}

// checkConfig verifies everything `appliance check` verifies: the
// configuration file and the scrape config files it references
// (config.Check), the rule files (each rule expression is parsed, the
// appliance's extensions checked), the rule pack names and the message
// templates. Every error is a *config.Error, "file:line: message", where
// file may be a rule or scrape config file, sorted by file and line. Rule
// files are checked even when the configuration has errors, so that one
// run shows everything.
func checkConfig(path string) []error {
	cfg, errs := config.Check(path)
	if cfg == nil {
		return errs
	}
	errs = append(errs, stageErrors(cfg)...)
	files, _ := cfg.RuleFilesResolved() // config.Check reported bad patterns
	for _, f := range files {
		ferrs, _ := checkRuleFileWith(f, ruleFileOptions(cfg))
		errs = append(errs, ferrs...)
	}
	config.SortErrors(errs)
	return errs
}

// ruleFileOptions are the options the rules stage reads cfg's rule files
// with (rulesConfig).
func ruleFileOptions(cfg *config.Config) rulefile.Options {
	rc := rulesConfig(cfg)
	return rulefile.Options{Severities: rc.Severities, Warmup: rc.Warmup}
}

// ruleFileWarnings returns what `appliance check` notes about the rule
// files of the config at path without refusing it ("file:line: warning:
// ..."), such as an alerting rule without a severity.
func ruleFileWarnings(path string) []string {
	cfg, err := config.LoadFile(path)
	if err != nil {
		return nil
	}
	files, _ := cfg.RuleFilesResolved()
	var out []string
	for _, f := range files {
		_, ws := checkRuleFileWith(f, ruleFileOptions(cfg))
		out = append(out, ws...)
	}
	return out
}

// validate loads what the stages check of a loaded configuration beyond
// config itself (rule pack names, message templates), in config's form:
// nil, or *config.Error joined and sorted. Rule files are the rules stage's
// to read when it prepares, at start and on reload.
func validate(cfg *config.Config) error {
	return config.JoinErrors(stageErrors(cfg)...)
}

// stageErrors are the errors of the checks config leaves to the stages.
func stageErrors(cfg *config.Config) []error {
	var errs []error
	known := rules.PackNames()
	for i, p := range cfg.RulePacks {
		if !slices.Contains(known, p) {
			errs = append(errs, cfg.ErrorAt(cfg.RulePackLine(i), fmt.Sprintf("unknown rule pack %q; known packs: %s", p, strings.Join(known, ", "))))
		}
	}
	t := cfg.Alerting.Templates
	if _, err := message.ParseTemplates(t.Title, ""); err != nil {
		errs = append(errs, cfg.ErrorAt(cfg.KeyLine("alerting", "templates", "title"), err.Error()))
	}
	if _, err := message.ParseTemplates("", t.Text); err != nil {
		errs = append(errs, cfg.ErrorAt(cfg.KeyLine("alerting", "templates", "text"), err.Error()))
	}
	if _, err := message.ParseTemplateFiles("", "", t.Files); err != nil {
		errs = append(errs, cfg.ErrorAt(cfg.KeyLine("alerting", "templates"), err.Error()))
	}
	// The remote_read clients build as the query stage builds them.
	if _, err := query.NewRemoteRead(nil).Prepare(cfg.RemoteRead, cfg.Global.ExternalLabels); err != nil {
		errs = append(errs, cfg.ErrorAt(cfg.KeyLine("remote_read"), err.Error()))
	}
	errs = append(errs, sloBoundErrors(cfg, "")...)
	return errs
}

// checkRuleFile parses a rule file with rulefile, which runs rulefmt (the
// parser the rules manager uses) and checks the appliance's extensions,
// and returns its errors as *config.Error with the line in the rule file.
func checkRuleFile(file string) []error {
	errs, _ := checkRuleFileWith(file, rulefile.Options{Severities: config.AlertingConfig{}.Severities()})
	return errs
}

// checkRuleFileWith is checkRuleFile with the config's options; it also
// returns the file's warnings.
func checkRuleFileWith(file string, opts rulefile.Options) ([]error, []string) {
	data, err := os.ReadFile(file)
	if err != nil {
		return []error{&config.Error{File: file, Msg: fmt.Sprintf("cannot read rule file: %v", err)}}, nil
	}
	f, errs := rulefile.ParseWith(data, opts)
	var warnings []string
	if f != nil {
		for _, w := range f.Warnings {
			warnings = append(warnings, fmt.Sprintf("%s:%d: warning: %s", file, w.Line, w.Msg))
		}
	}
	var out []error
	for _, err := range errs {
		var xe *rulefile.Error
		if errors.As(err, &xe) {
			out = append(out, &config.Error{File: file, Line: xe.Line, Msg: xe.Msg})
			continue
		}
		out = append(out, config.RuleFileError(file, data, err)...)
	}
	return out, warnings
}
