package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"time"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/query"
	"github.com/aiserve/appliance/slo"
	"github.com/aiserve/appliance/storage"
	"github.com/aiserve/appliance/ui/dashboard"
)

// cmdReport writes the weekly SLO report of one week: from a data
// directory (of an appliance that is stopped: the storage allows one
// process) or, with --url, from a running appliance's API.
func cmdReport(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgFile := fs.String("config", "", "config file with the slos (and reports) sections (default: the embedded default config)")
	data := fs.String("data", "", "data directory to read (default: storage.path of the config); the appliance using it must be stopped")
	apiURL := fs.String("url", "", "read a running appliance through its API at this URL instead of a data directory")
	week := fs.String("week", "", "ISO week, e.g. 2026-W48 (default: the last complete week)")
	format := fs.String("format", "html", "html, md or json")
	out := fs.String("out", "", "write the report to this file (default: standard output)")
	zone := fs.String("timezone", "", "IANA zone of the week (default: reports.weekly.timezone, else the local zone)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := runReport(reportFlags{config: *cfgFile, data: *data, url: *apiURL, week: *week, format: *format, out: *out, zone: *zone}, stdout); err != nil {
		fmt.Fprintf(stderr, "appliance report: %v\n", err)
		return 1
	}
	return 0
}

type reportFlags struct {
	config, data, url, week, format, out, zone string
}

func runReport(f reportFlags, stdout io.Writer) (err error) {
	cfg, err := loadConfig(runFlags{config: f.config, data: f.data})
	if err != nil {
		return err
	}
	if len(cfg.SLOs) == 0 {
		return errors.New("the config defines no slos; add an slos section (see appliance check)")
	}
	loc := slo.Location(cfg, time.Local)
	if f.zone != "" {
		if loc, err = time.LoadLocation(f.zone); err != nil {
			return fmt.Errorf("--timezone %q: %w", f.zone, err)
		}
	}
	w := slo.WeekOf(time.Now(), loc).Prev()
	if f.week != "" {
		if w, err = slo.ParseWeek(f.week); err != nil {
			return err
		}
	}
	var src slo.Source
	var releases slo.ReleaseSource
	if f.url != "" {
		u, err := url.Parse(f.url)
		if err != nil || u.Host == "" {
			return fmt.Errorf("--url %q is not an http:// or https:// URL", f.url)
		}
		api := slo.APISource{URL: u}
		src, releases = api, api
	} else {
		sopts := storage.DefaultOptions()
		sopts.Path = cfg.Storage.Path
		if r := time.Duration(cfg.Storage.Retention.Raw); r > 0 {
			sopts.RetentionRaw = r
		}
		if r := time.Duration(cfg.Storage.Retention.OneMinute); r > 0 {
			sopts.Retention1m = r
		}
		if r := time.Duration(cfg.Storage.Retention.FiveMinute); r > 0 {
			sopts.Retention5m = r
		}
		if _, err := os.Stat(sopts.Path); err != nil {
			return fmt.Errorf("data directory %s: %w", sopts.Path, err)
		}
		db, err := storage.Open(sopts)
		if err != nil {
			return fmt.Errorf("open %s (if the appliance is running, use --url): %w", sopts.Path, err)
		}
		defer func() {
			if cerr := db.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}()
		src = slo.EngineSource{Engine: query.New(query.Options{}, nil, nil), Queryable: db}
		st, err := dashboard.NewAnnotationStore(db.State())
		if err != nil {
			return err
		}
		releases = storedReleases(st)
	}
	opts := slo.OptionsFor(cfg)
	opts.Location = loc
	opts.Releases = releases
	opts.Now = slo.ReportTime(w, cfg.Reports.Weekly, loc)
	if h, err := os.Hostname(); err == nil {
		opts.Box = h
	}
	r, err := slo.Compute(context.Background(), src, w, opts)
	if err != nil {
		return err
	}
	b, err := slo.Render(r, f.format)
	if err != nil {
		return err
	}
	if f.out == "" {
		_, err = stdout.Write(b)
		return err
	}
	return os.WriteFile(f.out, b, 0o644)
}

// sloBoundErrors refuses an SLO threshold that is no bucket bound of its
// histogram, as far as the appliance knows the histogram: the bounds of
// the model servers it recognises, or, with a running appliance's URL,
// the data. config cannot check this: it needs the histogram.
func sloBoundErrors(cfg *config.Config, apiURL string) []error {
	src := slo.BoundSource(slo.DefaultKnownBounds())
	if apiURL != "" {
		u, err := url.Parse(apiURL)
		if err != nil || u.Host == "" {
			return []error{fmt.Errorf("--url %q is not an http:// or https:// URL", apiURL)}
		}
		src = slo.APISource{URL: u}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for i, s := range cfg.SLOs {
		if err := slo.CheckBounds(ctx, []*config.SLOConfig{s}, src); err != nil {
			errs = append(errs, cfg.ErrorAt(cfg.SLOLine(i, "threshold"), err.Error()))
		}
	}
	return errs
}
