package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"

	promconfig "github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/rulefmt"
	yaml3 "go.yaml.in/yaml/v3"
)

// Check verifies what `appliance check` verifies that config can verify
// on its own: the configuration file, the scrape config files it
// references, the rule_files patterns, and that the TLS and credential
// files it names exist. It returns the configuration as far as it could be
// read (nil when the file cannot be read), so that the command goes on with
// the checks that belong to the stages (rule files, rule pack names,
// message templates): config imports no stage. Every error is an *Error,
// "file:line: message", sorted by file and line.
func Check(path string) (*Config, []error) {
	cfg, errs := loadFile(path)
	if cfg == nil {
		return nil, errs
	}
	if _, err := cfg.ScrapeConfigsResolved(); err != nil {
		errs = append(errs, flattenErrors(err)...)
	}
	errs = append(errs, cfg.checkScrapeFiles()...)
	_, perrs := cfg.RuleFilesResolved()
	errs = append(errs, perrs...)
	sortErrors(errs)
	return cfg, errs
}

// RuleFilesResolved returns the files the rule_files patterns match, in
// the order of the patterns, and an *Error for each invalid pattern. A
// pattern that matches nothing is fine, as in Prometheus.
func (c *Config) RuleFilesResolved() ([]string, []error) {
	var (
		files []string
		errs  []error
	)
	for i, pat := range c.RuleFiles {
		m, err := filepath.Glob(pat)
		if err != nil {
			errs = append(errs, c.ErrorAt(c.ruleFileLine(i), fmt.Sprintf("invalid rule file pattern %q: %v", pat, err)))
			continue
		}
		files = append(files, m...)
	}
	return files, errs
}

// ErrorAt returns an *Error at a line of the configuration file, for the
// checks of the stages.
func (c *Config) ErrorAt(line int, msg string) *Error {
	file := c.file
	if file == "" {
		file = "-"
	}
	return &Error{File: file, Line: line, Msg: msg}
}

// KeyLine returns the line of the deepest of the nested keys (such as
// "alerting", "templates", "title") that the file has, or 0 when the
// Config was not loaded from a file or has none of them.
func (c *Config) KeyLine(keys ...string) int {
	if c.root == nil || len(keys) == 0 {
		return 0
	}
	if k, _ := mappingKey(c.root, keys[0]); k == nil {
		return 0
	}
	return keyLine(c.root, keys...)
}

// RulePackLine returns the line of RulePacks[i], or 0 if unknown.
func (c *Config) RulePackLine(i int) int {
	if i < len(c.rulePackLines) {
		return c.rulePackLines[i]
	}
	return 0
}

// ScrapeConfigsResolved returns the scrape configs of the file followed by
// those of scrape_config_files, which are read anew on every call, validated
// against the global section and checked for job names used twice, like
// Prometheus' Config.GetScrapeConfigs. It does not modify c.
func (c *Config) ScrapeConfigsResolved() ([]*promconfig.ScrapeConfig, error) {
	scs := slices.Clone(c.ScrapeConfigs)
	jobNames := map[string]string{}
	for i, sc := range c.ScrapeConfigs {
		where := "main config file"
		if i < len(c.scrapeNodes) {
			where = fmt.Sprintf("%s:%d", c.file, keyLine(c.scrapeNodes[i], "job_name"))
		}
		jobNames[sc.JobName] = where
	}
	var errs []error
	for _, pat := range c.ScrapeConfigFiles {
		files, err := filepath.Glob(pat)
		if err != nil {
			errs = append(errs, &Error{File: c.file, Msg: fmt.Sprintf("invalid scrape config file pattern %q: %v", pat, err)})
			continue
		}
		for _, f := range files {
			more, fileErrs := loadScrapeConfigFile(f, c.Global, jobNames)
			scs = append(scs, more...)
			errs = append(errs, fileErrs...)
		}
	}
	if len(errs) > 0 {
		return nil, joinErrors(errs)
	}
	return scs, nil
}

// loadScrapeConfigFile loads a file of scrape_config_files: a mapping with
// the one key scrape_configs.
func loadScrapeConfigFile(file string, global promconfig.GlobalConfig, jobNames map[string]string) ([]*promconfig.ScrapeConfig, []error) {
	l := &loader{file: file, dir: filepath.Dir(file)}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, []error{&Error{File: file, Msg: fmt.Sprintf("cannot read scrape config file: %v", err)}}
	}
	root, err := parseDocument(data)
	if err != nil {
		l.addErr(err)
		return nil, l.errs
	}
	if isNull(root) {
		return nil, nil
	}
	if root.Kind != yaml3.MappingNode {
		l.errorf(root.Line, "a scrape config file must be a mapping with the key scrape_configs")
		return nil, l.errs
	}
	var scs []*promconfig.ScrapeConfig
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], deref(root.Content[i+1])
		if k.Value != "scrape_configs" {
			l.errorf(k.Line, "unknown field %q", k.Value)
			continue
		}
		scs, _ = l.decodeScrapeConfigs(k.Value, v, global, true, jobNames)
	}
	for _, sc := range scs {
		sc.SetDirectory(l.dir)
	}
	return scs, l.errs
}

// checkScrapeFiles verifies that the files scrape configs read credentials
// and certificates from exist, as promtool does. Loading does not: a target
// whose files are missing fails alone when it is scraped.
func (c *Config) checkScrapeFiles() []error {
	var errs []error
	for i, sc := range c.ScrapeConfigs {
		h := sc.HTTPClientConfig
		files := []struct {
			keys []string
			path string
		}{
			{[]string{"tls_config", "ca_file"}, h.TLSConfig.CAFile},
			{[]string{"tls_config", "cert_file"}, h.TLSConfig.CertFile},
			{[]string{"tls_config", "key_file"}, h.TLSConfig.KeyFile},
			{[]string{"bearer_token_file"}, h.BearerTokenFile},
		}
		if h.BasicAuth != nil {
			files = append(files, struct {
				keys []string
				path string
			}{[]string{"basic_auth", "password_file"}, h.BasicAuth.PasswordFile})
		}
		if h.Authorization != nil {
			files = append(files, struct {
				keys []string
				path string
			}{[]string{"authorization", "credentials_file"}, h.Authorization.CredentialsFile})
		}
		for _, f := range files {
			msg := checkFileExists(f.keys[len(f.keys)-1], f.path)
			if msg == "" {
				continue
			}
			line := 0
			if i < len(c.scrapeNodes) {
				line = keyLine(c.scrapeNodes[i], f.keys...)
			}
			errs = append(errs, &Error{File: c.file, Line: line, Msg: fmt.Sprintf("job %q: %s", sc.JobName, msg)})
		}
	}
	return errs
}

var ruleErrLineRE = regexp.MustCompile(`(?s)^(\d+):\d+: (?:\d+:\d+: )?(.*)$`)

// RuleFileError turns an error of parsing the rule file (one of rulefmt,
// the parser the rules manager uses, or of the YAML library) into *Error
// with the line in the rule file; data is the file's text. The rules
// stage's own errors carry their line already; the command converts those.
func RuleFileError(file string, data []byte, err error) []error {
	root, _ := parseDocument(data)
	var re *rulefmt.Error
	if !errors.As(err, &re) {
		var out []error
		for _, m := range splitYAMLError(err) {
			if sm := ruleErrLineRE.FindStringSubmatch(m.msg); m.line == 0 && sm != nil {
				m.line, _ = strconv.Atoi(sm[1])
				m.msg = sm[2]
			}
			if m.line == 0 && root != nil {
				m.line = locate(root, m.msg)
			}
			out = append(out, &Error{File: file, Line: m.line, Msg: m.msg})
		}
		return out
	}
	msg := err.Error()
	line := 0
	if sm := ruleErrLineRE.FindStringSubmatch(msg); sm != nil {
		line, _ = strconv.Atoi(sm[1])
		msg = sm[2]
	} else if rule := findRule(root, re.Group, re.Rule); rule != nil {
		line = locate(rule, re.Unwrap().Error())
	}
	return []error{&Error{File: file, Line: line, Msg: msg}}
}

// findRule returns the node of rule number idx (1-based) of the group
// named group.
func findRule(root *yaml3.Node, group string, idx int) *yaml3.Node {
	_, groups := mappingKey(root, "groups")
	if groups == nil {
		return nil
	}
	for _, g := range groups.Content {
		if _, name := mappingKey(g, "name"); name == nil || name.Value != group {
			continue
		}
		_, rules := mappingKey(g, "rules")
		if rules == nil || idx < 1 || idx > len(rules.Content) {
			return nil
		}
		return deref(rules.Content[idx-1])
	}
	return nil
}

func (c *Config) ruleFileLine(i int) int {
	if i < len(c.ruleFileLines) {
		return c.ruleFileLines[i]
	}
	return 0
}
