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
	"github.com/aiserve/appliance/remotewrite"
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
	rep := checkConfig(path)
	errs := rep.errs
	if len(errs) == 0 && *apiURL != "" {
		// The data's bucket bounds, for histograms no known model
		// server has.
		errs = append(errs, sloBoundErrors(rep.cfg, *apiURL)...)
	}
	for _, err := range errs {
		fmt.Fprintln(stderr, err)
	}
	for _, w := range rep.warnings {
		fmt.Fprintln(stderr, w)
	}
	if len(errs) > 0 {
		fmt.Fprintf(stderr, "FAILED: %d error(s) in %s\n", len(errs), path)
		return 1
	}
	fmt.Fprintf(stdout, "SUCCESS: %s is valid\n", path)
	for _, g := range rep.generated {
		fmt.Fprintln(stdout, g)
	}
	return 0
}

// checkReport is what one pass of `appliance check` finds: the file is
// loaded once and each rule file read and parsed once.
type checkReport struct {
	cfg       *config.Config // nil when the file cannot be loaded
	errs      []error        // *config.Error, sorted by file and line
	warnings  []string       // what the config maps or ignores, then the rule files' warnings
	generated []string       // the PromQL the rule extensions compile to
}

// checkConfig verifies everything `appliance check` verifies: the
// configuration file and the scrape config files it references
// (config.Check), the rule files (each rule expression is parsed, the
// appliance's extensions checked), the rule pack names and the message
// templates. Every error is a *config.Error, "file:line: message", where
// file may be a rule or scrape config file. Rule files are checked even
// when the configuration has errors, so that one run shows everything.
func checkConfig(path string) checkReport {
	cfg, errs := config.Check(path)
	rep := checkReport{cfg: cfg, errs: errs}
	if cfg == nil {
		return rep
	}
	rep.errs = append(rep.errs, stageErrors(cfg)...)
	for _, w := range cfg.Warnings() {
		rep.warnings = append(rep.warnings, w.Error())
	}
	opts := ruleFileOptions(cfg)
	files, _ := cfg.RuleFilesResolved() // config.Check reported bad patterns
	for _, f := range files {
		ferrs, ws, gen := checkRuleFileWith(f, opts)
		rep.errs = append(rep.errs, ferrs...)
		rep.warnings = append(rep.warnings, ws...)
		rep.generated = append(rep.generated, gen...)
	}
	for _, p := range cfg.RulePacks {
		if data, ok := rules.Pack(p); ok {
			if f, errs := rulefile.Parse(data); len(errs) == 0 {
				rep.generated = append(rep.generated, generatedRules("pack "+p, f)...)
			}
		}
	}
	config.SortErrors(rep.errs)
	return rep
}

// ruleFileOptions are the options the rules stage reads cfg's rule files
// with (rulesConfig).
func ruleFileOptions(cfg *config.Config) rulefile.Options {
	rc := rulesConfig(cfg)
	return rulefile.Options{Severities: rc.Severities, Warmup: rc.Warmup}
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
	// The remote_write clients build as the remote write stage builds them.
	if _, err := remotewrite.New(remotewrite.Options{}).Prepare(cfg.RemoteWrite, cfg.Global.ExternalLabels); err != nil {
		errs = append(errs, cfg.ErrorAt(cfg.KeyLine("remote_write"), err.Error()))
	}
	// Hub mode's client builds as the query stage builds it (a TLS file
	// that does not load).
	if _, err := query.NewRemoteQuery().Prepare(cfg.Storage.RemoteQuery); err != nil {
		errs = append(errs, cfg.ErrorAt(cfg.KeyLine("storage", "remote_query"), err.Error()))
	}
	errs = append(errs, sloBoundErrors(cfg, "")...)
	return errs
}

// checkRuleFile parses a rule file with rulefile, which runs rulefmt (the
// parser the rules manager uses) and checks the appliance's extensions,
// and returns its errors as *config.Error with the line in the rule file.
func checkRuleFile(file string) []error {
	errs, _, _ := checkRuleFileWith(file, rulefile.Options{Severities: config.AlertingConfig{}.Severities()})
	return errs
}

// checkRuleFileWith is checkRuleFile with the config's options; it also
// returns the file's warnings and, when it has no error, the PromQL its
// extensions compile to.
func checkRuleFileWith(file string, opts rulefile.Options) (errs []error, warnings, generated []string) {
	data, err := os.ReadFile(file)
	if err != nil {
		return []error{&config.Error{File: file, Msg: fmt.Sprintf("cannot read rule file: %v", err)}}, nil, nil
	}
	f, perrs := rulefile.ParseWith(data, opts)
	if f != nil {
		for _, w := range f.Warnings {
			warnings = append(warnings, fmt.Sprintf("%s:%d: warning: %s", file, w.Line, w.Msg))
		}
	}
	for _, err := range perrs {
		var xe *rulefile.Error
		if errors.As(err, &xe) {
			errs = append(errs, &config.Error{File: file, Line: xe.Line, Msg: xe.Msg})
			continue
		}
		errs = append(errs, config.RuleFileError(file, data, err)...)
	}
	if len(perrs) == 0 && f != nil {
		generated = generatedRules(file, f)
	}
	return errs, warnings, generated
}
