package slo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/aiserve/appliance/config"
)

// Report formats, as the archive and the API name them.
const (
	FormatHTML     = "html"
	FormatMarkdown = "md"
	FormatJSON     = "json"
)

// Formats lists the formats in the order the archive lists them.
var Formats = []string{FormatHTML, FormatMarkdown, FormatJSON}

// ErrUnknownFormat is returned (wrapped) for a format not in Formats.
var ErrUnknownFormat = errors.New("unknown report format")

// Render renders r in format.
func Render(r *Report, format string) ([]byte, error) {
	switch format {
	case FormatHTML:
		return RenderHTML(r)
	case FormatMarkdown:
		return RenderMarkdown(r)
	case FormatJSON:
		return RenderJSON(r)
	}
	return nil, fmt.Errorf("%w %q; want html, md or json", ErrUnknownFormat, format)
}

// ReportTime is the time a week's report is as of: the first scheduled
// send after the week ends (the week's end without a schedule). Reports
// of one week therefore print the same time and read the same tiers
// however often they are made, so that the same command twice gives the
// same bytes.
func ReportTime(w Week, sched *config.WeeklyReportConfig, loc *time.Location) time.Time {
	end := w.End(loc)
	if sched == nil {
		return end
	}
	return NextSend(end, sched, loc)
}

// NextSend returns the first send time of sched at or after t.
func NextSend(t time.Time, sched *config.WeeklyReportConfig, loc *time.Location) time.Time {
	lt := t.In(loc)
	d := time.Date(lt.Year(), lt.Month(), lt.Day(), 0, 0, 0, 0, loc)
	for i := 0; i < 8; i++ {
		day := time.Date(d.Year(), d.Month(), d.Day()+i, 0, 0, 0, 0, loc)
		at := time.Date(day.Year(), day.Month(), day.Day(), sched.Minute()/60, sched.Minute()%60, 0, 0, loc)
		if day.Weekday() == sched.Weekday() && !at.Before(t) {
			return at
		}
	}
	return t // not reached: one of eight days is the weekday
}

var (
	bucketReports = []byte("slo_reports")      // "<week>.<format>" → rendered bytes
	bucketSent    = []byte("slo_reports_sent") // "<week>" → RFC 3339 time it was handed to notify
)

// Archive keeps rendered reports in the state file, one bucket of its
// own. Methods are safe for concurrent use (bbolt serialises them).
type Archive struct {
	db *bolt.DB
}

// NewArchive opens the archive in db, creating its buckets.
func NewArchive(db *bolt.DB) (*Archive, error) {
	err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketReports, bucketSent} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("open report archive: %w", err)
	}
	return &Archive{db: db}, nil
}

// Put stores the report of week in every format.
func (a *Archive) Put(r *Report) error {
	files := map[string][]byte{}
	for _, f := range Formats {
		b, err := Render(r, f)
		if err != nil {
			return err
		}
		files[f] = b
	}
	return a.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketReports)
		for f, data := range files {
			if err := b.Put([]byte(r.Week+"."+f), data); err != nil {
				return fmt.Errorf("archive report %s: %w", r.Week, err)
			}
		}
		return nil
	})
}

// Get returns an archived report, or ok false.
func (a *Archive) Get(week, format string) (data []byte, ok bool, err error) {
	err = a.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketReports).Get([]byte(week + "." + format)); v != nil {
			data, ok = bytes.Clone(v), true
		}
		return nil
	})
	return data, ok, err
}

// ArchivedReport is one week in the archive.
type ArchivedReport struct {
	Week    string         `json:"week"`
	Formats []string       `json:"formats"`
	Sizes   map[string]int `json:"sizes"`
	// Sent is when the report was handed to notify's outbox; nil if it
	// was made on demand only.
	Sent *time.Time `json:"sent,omitempty"`
}

// List returns the archived weeks, newest first.
func (a *Archive) List() ([]ArchivedReport, error) {
	byWeek := map[string]*ArchivedReport{}
	err := a.db.View(func(tx *bolt.Tx) error {
		err := tx.Bucket(bucketReports).ForEach(func(k, v []byte) error {
			week, f, ok := strings.Cut(string(k), ".")
			if !ok {
				return nil
			}
			r := byWeek[week]
			if r == nil {
				r = &ArchivedReport{Week: week, Sizes: map[string]int{}}
				byWeek[week] = r
			}
			r.Formats = append(r.Formats, f)
			r.Sizes[f] = len(v)
			return nil
		})
		if err != nil {
			return err
		}
		return tx.Bucket(bucketSent).ForEach(func(k, v []byte) error {
			if r := byWeek[string(k)]; r != nil {
				if t, err := time.Parse(time.RFC3339, string(v)); err == nil {
					r.Sent = &t
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list report archive: %w", err)
	}
	out := make([]ArchivedReport, 0, len(byWeek))
	for _, r := range byWeek {
		slices.SortFunc(r.Formats, func(a, b string) int { return slices.Index(Formats, a) - slices.Index(Formats, b) })
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b ArchivedReport) int { return strings.Compare(b.Week, a.Week) })
	return out, nil
}

// sent reports whether week's report was handed to notify.
func (a *Archive) sent(week string) (bool, error) {
	var ok bool
	err := a.db.View(func(tx *bolt.Tx) error {
		ok = tx.Bucket(bucketSent).Get([]byte(week)) != nil
		return nil
	})
	return ok, err
}

// Reporter makes reports on demand: from the archive when the week is
// there, else computed from its Source.
type Reporter struct {
	Source  Source
	Archive *Archive // may be nil
	// Options returns the options in force (the config may be reloaded);
	// Now and Location are filled in per report.
	Options  func() ReportOptions
	Schedule func() *config.WeeklyReportConfig
	Location func() *time.Location
	// Now is the clock of Statuses; nil is time.Now.
	Now func() time.Time
	// Send sends a week's report now (Scheduler.SendNow); nil when
	// nothing can send.
	Send func(ctx context.Context, week string) error
}

// SendNow sends week's report through Send.
func (rp *Reporter) SendNow(ctx context.Context, week string) error {
	if rp.Send == nil {
		return ErrNoSchedule
	}
	return rp.Send(ctx, week)
}

// Statuses returns every SLO's status now, sorted by budget left.
func (rp *Reporter) Statuses(ctx context.Context) ([]Status, error) {
	now := time.Now
	if rp.Now != nil {
		now = rp.Now
	}
	return Statuses(ctx, rp.Source, rp.Options().SLOs, now())
}

// Report returns week's report in format, and whether it came from the
// archive.
func (rp *Reporter) Report(ctx context.Context, week, format string) ([]byte, error) {
	w, err := ParseWeek(week)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(Formats, format) {
		return nil, fmt.Errorf("%w %q; want html, md or json", ErrUnknownFormat, format)
	}
	if rp.Archive != nil {
		if data, ok, err := rp.Archive.Get(w.String(), format); err != nil || ok {
			return data, err
		}
	}
	r, err := rp.compute(ctx, w)
	if err != nil {
		return nil, err
	}
	return Render(r, format)
}

func (rp *Reporter) compute(ctx context.Context, w Week) (*Report, error) {
	opts := rp.Options()
	loc := rp.Location()
	opts.Location = loc
	opts.Now = ReportTime(w, rp.Schedule(), loc)
	return Compute(ctx, rp.Source, w, opts)
}

// List returns the archive's weeks.
func (rp *Reporter) List() ([]ArchivedReport, error) {
	if rp.Archive == nil {
		return []ArchivedReport{}, nil
	}
	return rp.Archive.List()
}

// MarshalList is the JSON of GET /api/v1/appliance/reports.
func MarshalList(rs []ArchivedReport) ([]byte, error) {
	return json.Marshal(map[string]any{"status": "success", "data": rs})
}

// Location returns the zone of cfg's weekly report, or loc when it names
// none.
func Location(cfg *config.Config, loc *time.Location) *time.Location {
	if w := cfg.Reports.Weekly; w != nil && w.Timezone != "" {
		return w.Location()
	}
	return loc
}

// OptionsFor returns the report options of cfg (without Now and
// Location).
func OptionsFor(cfg *config.Config) ReportOptions {
	return ReportOptions{
		SLOs:         cfg.SLOs,
		RawRetention: time.Duration(cfg.Storage.Retention.Raw),
		ExternalURL:  cfg.Web.ExternalURL,
	}
}
