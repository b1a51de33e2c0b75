package dashboard

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	bolt "go.etcd.io/bbolt"
)

// bucketReleaseTargets keeps what the ReleaseDetector saw of each target
// at its last look: "job\xffinstance" → JSON releaseTarget.
var bucketReleaseTargets = []byte("annotations_release_targets")

// releaseVersionsQuery reads the versions each target serves: the values
// of version (Triton, FastAPI apps) or model_version per model, from any
// series but the runtimes' own (python_info's version is Python's, go_info's
// Go's) and the appliance's.
const releaseVersionsQuery = `group by (job, instance, model, model_name, version, model_version) (` +
	`{__name__!~"(go|python|process|appliance)_.*", version!=""} or ` +
	`{__name__!~"(go|python|process|appliance)_.*", model_version!=""})`

// releaseStartsQuery reads each target's process start, but the
// appliance's own (its self-scrape job): its restarts are no model's
// release.
const releaseStartsQuery = `max by (job, instance) (process_start_time_seconds{job!="appliance"})`

// releaseTarget is one target as the detector last saw it.
type releaseTarget struct {
	// Start is process_start_time_seconds; 0 when the target has none.
	Start float64 `json:"start,omitempty"`
	// Versions are the versions served per model ("" when the series
	// name no model), sorted.
	Versions map[string][]string `json:"versions,omitempty"`
	// ModelLabel names the label the model is in (model or model_name).
	ModelLabel map[string]string `json:"model_label,omitempty"`
	// Seen is when the detector last looked (Unix seconds).
	Seen float64 `json:"seen"`
}

// ReleaseDetector records releases in the AnnotationStore as they happen:
//
//   - a model of a target serves a version it did not serve at the last
//     look (a new value of version or model_version): a release at the
//     process start when the process started since, else at the look;
//   - a target without any version label whose process_start_time_seconds
//     changed: a release at the new start (tags release and restart),
//     since a deploy is all its series can show.
//
// A target seen for the first time only sets the baseline. What the
// detector saw is kept in the state file beside the annotations, written
// in the same transaction, so a release during downtime is recorded at
// the first look after it and none is recorded twice.
type ReleaseDetector struct {
	Engine    promql.QueryEngine
	Queryable storage.Queryable
	Store     *AnnotationStore
	Now       func() time.Time
	// Interval is how often Run looks (default 30s).
	Interval time.Duration
	Logger   *slog.Logger
}

// Run calls Detect every Interval until ctx ends.
func (d *ReleaseDetector) Run(ctx context.Context) error {
	iv := d.Interval
	if iv <= 0 {
		iv = 30 * time.Second
	}
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		rs, err := d.Detect(ctx)
		switch {
		case err != nil && ctx.Err() == nil && d.Logger != nil:
			d.Logger.Warn("release detection failed; will retry", "err", err)
		case d.Logger != nil:
			for _, r := range rs {
				d.Logger.Info("release recorded", "text", r.Text)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (d *ReleaseDetector) instant(ctx context.Context, expr string, at time.Time) (promql.Vector, error) {
	q, err := d.Engine.NewInstantQuery(ctx, d.Queryable, nil, expr, at)
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", expr, err)
	}
	defer q.Close()
	res := q.Exec(ctx)
	if res.Err != nil {
		return nil, fmt.Errorf("query %s: %w", expr, res.Err)
	}
	v, err := res.Vector()
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", expr, err)
	}
	return v, nil
}

func targetKey(job, instance string) string { return job + "\xff" + instance }

// Detect looks at every target now and records the releases since the
// last look; it returns them.
func (d *ReleaseDetector) Detect(ctx context.Context) ([]Annotation, error) {
	now := d.Now()
	vers, err := d.instant(ctx, releaseVersionsQuery, now)
	if err != nil {
		return nil, err
	}
	starts, err := d.instant(ctx, releaseStartsQuery, now)
	if err != nil {
		return nil, err
	}
	type target struct {
		job, instance string
		cur           releaseTarget
	}
	targets := map[string]*target{}
	get := func(job, instance string) *target {
		k := targetKey(job, instance)
		if targets[k] == nil {
			targets[k] = &target{job: job, instance: instance, cur: releaseTarget{Versions: map[string][]string{}, ModelLabel: map[string]string{}}}
		}
		return targets[k]
	}
	for _, s := range vers {
		tg := get(s.Metric.Get("job"), s.Metric.Get("instance"))
		label, model := "model", s.Metric.Get("model")
		if model == "" {
			label, model = "model_name", s.Metric.Get("model_name")
		}
		v := s.Metric.Get("model_version")
		if v == "" {
			v = s.Metric.Get("version")
		}
		if !slices.Contains(tg.cur.Versions[model], v) {
			tg.cur.Versions[model] = append(tg.cur.Versions[model], v)
			slices.Sort(tg.cur.Versions[model])
		}
		if model != "" {
			tg.cur.ModelLabel[model] = label
		}
	}
	for _, s := range starts {
		if !math.IsNaN(s.F) {
			get(s.Metric.Get("job"), s.Metric.Get("instance")).cur.Start = s.F
		}
	}
	keys := make([]string, 0, len(targets))
	for k := range targets {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	seen := float64(now.UnixMilli()) / 1000
	var out []Annotation
	var followed []*target
	err = d.Store.db.Update(func(tx *bolt.Tx) error {
		followed = followed[:0]
		b := tx.Bucket(bucketReleaseTargets)
		for _, k := range keys {
			tg := targets[k]
			cur := tg.cur
			cur.Seen = seen
			var prev *releaseTarget
			if v := b.Get([]byte(k)); v != nil {
				prev = &releaseTarget{}
				if err := json.Unmarshal(v, prev); err != nil {
					return fmt.Errorf("release state of %s %s: %w", tg.job, tg.instance, err)
				}
			}
			if prev == nil {
				followed = append(followed, tg)
			} else {
				for _, a := range releasesBetween(tg.job, tg.instance, prev, &cur) {
					if err := putAnnotation(tx, &a); err != nil {
						return err
					}
					out = append(out, a)
				}
				// A target that is down keeps what it served.
				for m, vs := range prev.Versions {
					if _, ok := cur.Versions[m]; !ok {
						cur.Versions[m] = vs
						if l, ok := prev.ModelLabel[m]; ok {
							cur.ModelLabel[m] = l
						}
					}
				}
				if cur.Start == 0 {
					cur.Start = prev.Start
				}
			}
			v, err := json.Marshal(cur)
			if err != nil {
				return err
			}
			if err := b.Put([]byte(k), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record releases: %w", err)
	}
	if d.Logger != nil {
		for _, tg := range followed {
			d.Logger.Info("release detection follows a new target", "job", tg.job, "instance", tg.instance,
				"versions", fmt.Sprint(tg.cur.Versions), "start", tg.cur.Start)
		}
	}
	return out, nil
}

// releasesBetween compares two looks at one target.
func releasesBetween(job, instance string, prev, cur *releaseTarget) []Annotation {
	restarted := cur.Start > 0 && prev.Start > 0 && cur.Start != prev.Start
	at := cur.Seen
	if restarted && cur.Start > prev.Seen && cur.Start <= cur.Seen {
		at = cur.Start
	}
	var out []Annotation
	models := make([]string, 0, len(cur.Versions))
	for m := range cur.Versions {
		models = append(models, m)
	}
	slices.Sort(models)
	for _, m := range models {
		was, ok := prev.Versions[m]
		if !ok {
			continue // a model the target did not serve: no baseline
		}
		for _, v := range cur.Versions[m] {
			if slices.Contains(was, v) {
				continue
			}
			ls := map[string]string{"job": job, "instance": instance, "version": v, "previous_version": strings.Join(was, ",")}
			text := strings.Join(nonEmpty("release:", job, instance, m, v), " ")
			if m != "" {
				ls[cmp.Or(cur.ModelLabel[m], "model")] = m
			}
			if len(was) > 0 {
				text += " (was " + strings.Join(was, ", ") + ")"
			}
			out = append(out, Annotation{Time: at, End: at, Kind: KindRelease, Text: text, Tags: []string{TagRelease}, Labels: ls})
		}
	}
	if restarted && len(cur.Versions) == 0 && len(prev.Versions) == 0 && cur.Start > prev.Start {
		out = append(out, Annotation{Time: cur.Start, End: cur.Start, Kind: KindRelease,
			Text:   strings.Join(nonEmpty("release:", job, instance, "restarted (process start changed; no version label)"), " "),
			Tags:   []string{TagRelease, KindRestart},
			Labels: map[string]string{"job": job, "instance": instance}})
	}
	return out
}

func nonEmpty(ss ...string) []string {
	out := ss[:0:0]
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
