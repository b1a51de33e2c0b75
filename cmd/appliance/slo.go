package main

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/notify"
	"github.com/aiserve/appliance/notify/message"
	"github.com/aiserve/appliance/query"
	"github.com/aiserve/appliance/slo"
	"github.com/aiserve/appliance/storage"
	"github.com/aiserve/appliance/ui/dashboard"
)

// sloReports is the SLO stage's running part: the weekly reports, served
// on demand (the web server's Reports, /api/v1/appliance/reports and
// /api/v1/appliance/slos) and sent on schedule through notify's outbox,
// and the releases they list, recorded as they happen.
// The SLOs' rules run in the rules stage (sloRuleFiles).
type sloReports struct {
	cfg      atomic.Pointer[config.Config]
	reporter *slo.Reporter
	sched    *slo.Scheduler
	// annotations are the stored annotations (the web server's
	// Annotations); releases records the releases among them, which the
	// reports list.
	annotations *dashboard.AnnotationStore
	releases    *dashboard.ReleaseDetector
}

// newSLOReports builds the reports part; it starts nothing.
func newSLOReports(cfg *config.Config, db *storage.DB, engine *query.Engine, n *notify.Notifier, logger *slog.Logger) (*sloReports, error) {
	p := &sloReports{}
	p.cfg.Store(cfg)
	archive, err := slo.NewArchive(db.State())
	if err != nil {
		return nil, err
	}
	if p.annotations, err = dashboard.NewAnnotationStore(db.State()); err != nil {
		return nil, err
	}
	p.releases = &dashboard.ReleaseDetector{Engine: engine, Queryable: db, Store: p.annotations, Now: time.Now,
		Logger: logger.With("part", "releases")}
	box, _ := os.Hostname()
	p.reporter = &slo.Reporter{
		// The tiers: last week is older than the raw tier keeps.
		Source:  slo.EngineSource{Engine: engine, Queryable: db},
		Archive: archive,
		Options: func() slo.ReportOptions {
			c := p.cfg.Load()
			o := slo.OptionsFor(c)
			o.ExternalURL, o.Box = externalURL(c), box
			o.Notifications = notificationCounter(n)
			o.Releases = storedReleases(p.annotations)
			return o
		},
		Schedule: func() *config.WeeklyReportConfig { return p.cfg.Load().Reports.Weekly },
		Location: func() *time.Location { return slo.Location(p.cfg.Load(), time.Local) },
	}
	p.sched = &slo.Scheduler{
		Reporter: p.reporter, Archive: archive, Outbox: n,
		Config: func() *config.WeeklyReportConfig { return p.cfg.Load().Reports.Weekly },
		Now:    time.Now,
		Logger: logger,
	}
	p.reporter.Send = p.sched.SendNow
	return p, nil
}

// run sends the scheduled reports and records releases until ctx ends;
// it returns when both have stopped.
func (p *sloReports) run(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- p.releases.Run(ctx) }()
	err := p.sched.Run(ctx)
	return errors.Join(err, <-done)
}

// storedReleases lists the annotations tagged release of the state file
// for the reports.
func storedReleases(st *dashboard.AnnotationStore) slo.ReleaseSource {
	return slo.ReleaseFunc(func(_ context.Context, from, to time.Time) ([]slo.ReleaseMark, error) {
		as, err := st.List(from, to, dashboard.TagRelease)
		if err != nil {
			return nil, err
		}
		out := make([]slo.ReleaseMark, 0, len(as))
		for _, a := range as {
			out = append(out, slo.ReleaseMark{At: time.UnixMilli(int64(math.Round(a.Time * 1000))), Text: a.Text, Labels: a.Labels})
		}
		return out, nil
	})
}

// apply takes a reloaded config (validated by loadConfig already).
func (p *sloReports) apply(cfg *config.Config) { p.cfg.Store(cfg) }

// sloRuleFiles returns the SLOs' rule groups (slo:<name>) for the rules
// stage. The threshold's le text comes from the bounds of the model
// servers the appliance knows; other histograms are matched by the usual
// spellings of the number. loadConfig has refused thresholds that are no
// bound (stageErrors), so an error here only means an unknown histogram.
func sloRuleFiles(cfg *config.Config) map[string][]byte {
	if len(cfg.SLOs) == 0 {
		return nil
	}
	les, _ := slo.ResolveBounds(context.Background(), cfg.SLOs, slo.DefaultKnownBounds())
	file, err := slo.RuleFile(cfg.SLOs, les)
	if err != nil {
		return nil
	}
	return map[string][]byte{"slo": file}
}

// notificationCounter counts, in notify's delivery history (the last
// thousand deliveries), the alert notifications sent about an alert: those
// whose group key names it (group_by alertname, the default) or whose
// title does.
func notificationCounter(n *notify.Notifier) func(alert string, from, to time.Time) (int, error) {
	return func(alert string, from, to time.Time) (int, error) {
		hist, err := n.History(1000)
		if err != nil {
			return 0, err
		}
		count := 0
		for _, d := range hist {
			if d.Result != "sent" || d.Kind != message.KindAlerts || d.At.Before(from) || d.At.After(to) {
				continue
			}
			if strings.Contains(d.GroupKey, `alertname="`+alert+`"`) || slices.Contains(strings.Fields(d.Title), alert) {
				count++
			}
		}
		return count, nil
	}
}
