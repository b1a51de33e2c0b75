package slo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/notify/message"
)

// Outbox takes the report for its receivers: notify's durable outbox
// (notify.Notifier implements it). EnqueueOnce must enqueue nothing for a
// key it enqueued before, also after a restart, and report whether it
// enqueued; build returns a new message per integration.
type Outbox interface {
	EnqueueOnce(key string, receivers []string, build func(receiver string) *message.Message) (bool, error)
}

// Scheduler sends the weekly report: at the configured day and time, the
// report of the ISO week that just ended is archived and handed to the
// outbox, once. After downtime it catches up with the latest week that
// is due and was not sent; older missed weeks stay in the archive's
// reach on demand but are not mailed out late.
type Scheduler struct {
	Reporter *Reporter
	Archive  *Archive
	Outbox   Outbox
	// Config returns the reports.weekly section in force (nil: no
	// schedule).
	Config func() *config.WeeklyReportConfig
	Now    func() time.Time
	// Interval is how often Run looks at the clock (default 30s).
	Interval time.Duration
	Logger   *slog.Logger
}

// Run calls Tick every Interval until ctx ends.
func (s *Scheduler) Run(ctx context.Context) error {
	iv := s.Interval
	if iv <= 0 {
		iv = 30 * time.Second
	}
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		if err := s.Tick(ctx); err != nil && ctx.Err() == nil && s.Logger != nil {
			s.Logger.Warn("weekly report not sent; will retry", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Due returns the latest week whose send time is at or before now.
func Due(now time.Time, sched *config.WeeklyReportConfig) Week {
	loc := sched.Location()
	w := WeekOf(now, loc).Prev()
	for ReportTime(w, sched, loc).After(now) {
		w = w.Prev()
	}
	return w
}

// Tick sends the report that is due, if it was not sent yet.
func (s *Scheduler) Tick(ctx context.Context) error {
	sched := s.Config()
	if sched == nil || len(sched.Receivers) == 0 {
		return nil
	}
	w := Due(s.Now(), sched)
	sent, err := s.Archive.sent(w.String())
	if err != nil || sent {
		return err
	}
	return s.send(ctx, w, sched, "report:"+w.String())
}

// ErrNoSchedule is returned by SendNow without reports.weekly receivers.
var ErrNoSchedule = errors.New("reports.weekly names no receivers")

// SendNow sends week's report to the schedule's receivers at once, also
// when it was sent before (the dashboard's "send now"); the scheduled
// send of that week still happens once, unless this one was first.
func (s *Scheduler) SendNow(ctx context.Context, week string) error {
	w, err := ParseWeek(week)
	if err != nil {
		return err
	}
	sched := s.Config()
	if sched == nil || len(sched.Receivers) == 0 {
		return ErrNoSchedule
	}
	return s.send(ctx, w, sched, fmt.Sprintf("report:%s:now:%d", w, s.Now().UnixNano()))
}

func (s *Scheduler) send(ctx context.Context, w Week, sched *config.WeeklyReportConfig, key string) error {
	r, err := s.Reporter.compute(ctx, w)
	if err != nil {
		return fmt.Errorf("compute report %s: %w", w, err)
	}
	if err := s.Archive.Put(r); err != nil {
		return err
	}
	md, err := RenderMarkdown(r)
	if err != nil {
		return err
	}
	mail, err := RenderEmailHTML(r)
	if err != nil {
		return err
	}
	title := Headline(r)
	build := func(receiver string) *message.Message {
		return &message.Message{
			Kind: message.KindReport, Status: "firing", Title: title, Text: string(md), HTML: string(mail),
			GroupLabels:       map[string]string{"report": r.Week},
			CommonLabels:      map[string]string{"report": r.Week},
			CommonAnnotations: map[string]string{"summary": title, "description": string(md)},
			ExternalURL:       r.ExternalURL,
		}
	}
	if _, err := s.Outbox.EnqueueOnce(key, sched.Receivers, build); err != nil {
		return err
	}
	if s.Logger != nil {
		s.Logger.Info("weekly report handed to the outbox", "week", r.Week, "receivers", sched.Receivers)
	}
	return s.Archive.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSent).Put([]byte(r.Week), []byte(s.Now().UTC().Format(time.RFC3339)))
	})
}

// Headline is the report's subject line: the week and how many SLOs held.
func Headline(r *Report) string {
	met, total := 0, 0
	for _, s := range r.SLOs {
		if s.Met == nil {
			continue
		}
		total++
		if *s.Met {
			met++
		}
	}
	return fmt.Sprintf("SLO report %s: %d of %d SLOs met", r.Week, met, total)
}
