package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/aiserve/appliance/config"
)

func cmdCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgFile := fs.String("config", "", "config file to check (required)")
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
	errs := config.Check(path)
	for _, err := range errs {
		fmt.Fprintln(stderr, err)
	}
	if len(errs) > 0 {
		fmt.Fprintf(stderr, "FAILED: %d error(s) in %s\n", len(errs), path)
		return 1
	}
	fmt.Fprintf(stdout, "SUCCESS: %s is valid\n", path)
	printGeneratedRules(stdout, path)
	return 0
}
