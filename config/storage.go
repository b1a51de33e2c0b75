package config

import (
	"errors"
	"time"

	promconfig "github.com/prometheus/prometheus/config"

	"github.com/prometheus/common/model"
)

const day = 24 * time.Hour

// Defaults of the storage and query sections.
var (
	DefaultRetentionConfig = RetentionConfig{
		Raw:        model.Duration(7 * day),
		OneMinute:  model.Duration(30 * day),
		FiveMinute: model.Duration(90 * day),
	}
	DefaultStorageConfig = StorageConfig{
		Path:        "data",
		Retention:   DefaultRetentionConfig,
		Exemplars:   DefaultExemplarsConfig,
		Cardinality: DefaultCardinalityConfig,
	}
	// DefaultCardinalityConfig flags a label with more than 1000 values
	// for one metric, and checks every minute.
	DefaultCardinalityConfig = CardinalityConfig{
		MaxLabelValues: 1000,
		Interval:       model.Duration(time.Minute),
	}
	// DefaultExemplarsConfig keeps Prometheus' default of 100000
	// exemplars in memory.
	DefaultExemplarsConfig = ExemplarsConfig{MaxExemplars: 100_000}
	// DefaultQueryConfig holds Prometheus' defaults for its --query.* flags.
	DefaultQueryConfig = QueryConfig{
		Timeout:        model.Duration(2 * time.Minute),
		MaxSamples:     50_000_000,
		MaxConcurrency: 20,
		LookbackDelta:  model.Duration(5 * time.Minute),
	}
)

// StorageConfig is the storage section.
type StorageConfig struct {
	// Path is the data directory, relative to the working directory like
	// the --data flag that overrides it.
	Path      string          `yaml:"path"`
	Retention RetentionConfig `yaml:"retention"`
	// MemoryBudget caps the memory of the storage's caches; 0 sizes them
	// from the memory of the box.
	MemoryBudget Bytes `yaml:"memory_budget,omitempty"`
	// MinFreeDisk is the free-disk watermark: below it ingest answers 503
	// and scrapes are dropped until space is freed; 0 means the storage's
	// default (100MB, VictoriaMetrics' own).
	MinFreeDisk Bytes `yaml:"min_free_disk,omitempty"`
	// Exemplars is Prometheus' storage.exemplars: the in-memory ring of
	// exemplars from scrapes and remote write.
	Exemplars ExemplarsConfig `yaml:"exemplars"`
	// MaxSeries is the hard guard on active series (storage.max_series):
	// samples of new series beyond it are refused and counted per target,
	// existing series keep flowing. 0 turns the guard off.
	MaxSeries int `yaml:"max_series,omitempty"`
	// Cardinality configures the cardinality check behind /cardinality
	// and the appliance_cardinality_warning series.
	Cardinality CardinalityConfig `yaml:"cardinality"`
	// RemoteQuery, when set, is hub mode: queries, rules, the dashboard
	// and the reports read this Prometheus HTTP API (remotequery.go).
	RemoteQuery *RemoteQueryConfig `yaml:"remote_query,omitempty"`

	notes []string // what storage.tsdb maps and ignores, for `appliance check`
}

// ExemplarsConfig is Prometheus' storage.exemplars section.
type ExemplarsConfig struct {
	// MaxExemplars is the size of the ring shared by all series; 0 keeps
	// none. Applied on reload.
	MaxExemplars int64 `yaml:"max_exemplars"`
}

// CardinalityConfig is storage.cardinality.
type CardinalityConfig struct {
	// MaxLabelValues is N: a label with more than N values for one metric
	// is flagged, whatever its values look like.
	MaxLabelValues int `yaml:"max_label_values"`
	// Interval is how often the check runs and writes
	// appliance_cardinality_warning.
	Interval model.Duration `yaml:"interval"`
}

// RetentionConfig says how long each tier keeps data. A coarser tier keeps
// data at least as long as a finer one, or queries over old data would find
// holes.
type RetentionConfig struct {
	Raw        model.Duration `yaml:"raw"`
	OneMinute  model.Duration `yaml:"1m"`
	FiveMinute model.Duration `yaml:"5m"`
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (c *StorageConfig) UnmarshalYAML(unmarshal func(any) error) error {
	// The tiers are pointers here to tell a tier left out from one set, so
	// that "raw: 60d" alone raises the 1m and 5m tiers with it instead of
	// failing against their defaults.
	var in struct {
		Path      string `yaml:"path"`
		Retention struct {
			Raw        *model.Duration `yaml:"raw"`
			OneMinute  *model.Duration `yaml:"1m"`
			FiveMinute *model.Duration `yaml:"5m"`
		} `yaml:"retention"`
		MemoryBudget Bytes `yaml:"memory_budget"`
		MinFreeDisk  Bytes `yaml:"min_free_disk"`
		MaxSeries    int   `yaml:"max_series"`
		Cardinality  struct {
			MaxLabelValues *int            `yaml:"max_label_values"`
			Interval       *model.Duration `yaml:"interval"`
		} `yaml:"cardinality"`
		Exemplars struct {
			MaxExemplars *int64 `yaml:"max_exemplars"`
		} `yaml:"exemplars"`
		// TSDB is Prometheus' storage.tsdb, read for its retention.
		TSDB        *promconfig.TSDBConfig `yaml:"tsdb"`
		RemoteQuery *RemoteQueryConfig     `yaml:"remote_query"`
	}
	if err := unmarshal(&in); err != nil {
		// remote_query's own errors name keys below it.
		if fe := (*fieldError)(nil); errors.As(err, &fe) {
			fe.keys = append([]string{"remote_query"}, fe.keys...)
		}
		return err
	}
	c.notes = nil
	if t := in.TSDB; t != nil {
		notes, raw := tsdbNotes(t)
		if raw != nil && in.Retention.Raw == nil {
			in.Retention.Raw = raw
		}
		defer func() { c.notes = notes }()
	}
	*c = DefaultStorageConfig
	if in.Path != "" {
		c.Path = in.Path
	}
	c.MemoryBudget = in.MemoryBudget
	c.MinFreeDisk = in.MinFreeDisk
	if in.MaxSeries < 0 {
		return fieldErrorf([]string{"max_series"}, "max_series must be 0 (no limit) or more")
	}
	c.MaxSeries = in.MaxSeries
	if n := in.Cardinality.MaxLabelValues; n != nil {
		if *n < 1 {
			return fieldErrorf([]string{"cardinality", "max_label_values"}, "max_label_values must be 1 or more")
		}
		c.Cardinality.MaxLabelValues = *n
	}
	if d := in.Cardinality.Interval; d != nil {
		if *d < model.Duration(time.Second) {
			return fieldErrorf([]string{"cardinality", "interval"}, "cardinality interval must be 1s or more")
		}
		c.Cardinality.Interval = *d
	}
	c.RemoteQuery = in.RemoteQuery
	if m := in.Exemplars.MaxExemplars; m != nil {
		if *m < 0 {
			return fieldErrorf([]string{"exemplars", "max_exemplars"}, "max_exemplars must be 0 (keep none) or more")
		}
		c.Exemplars.MaxExemplars = *m
	}

	r := in.Retention
	tiers := []struct {
		key string
		set *model.Duration
		val *model.Duration
	}{
		{"raw", r.Raw, &c.Retention.Raw},
		{"1m", r.OneMinute, &c.Retention.OneMinute},
		{"5m", r.FiveMinute, &c.Retention.FiveMinute},
	}
	for i, t := range tiers {
		if t.set != nil {
			if *t.set <= 0 {
				return fieldErrorf([]string{"retention", t.key}, "retention %s must be greater than 0", t.key)
			}
			*t.val = *t.set
			continue
		}
		if i > 0 && *tiers[i-1].val > *t.val {
			*t.val = *tiers[i-1].val
		}
	}
	for i := 1; i < len(tiers); i++ {
		prev, t := tiers[i-1], tiers[i]
		if *t.val < *prev.val {
			return fieldErrorf([]string{"retention", t.key},
				"retention %s (%s) is shorter than retention %s (%s); a coarser tier must keep data at least as long as a finer one",
				t.key, *t.val, prev.key, *prev.val)
		}
	}
	return nil
}

// QueryConfig is the query section: limits of the PromQL engine.
type QueryConfig struct {
	Timeout        model.Duration `yaml:"timeout"`
	MaxSamples     int            `yaml:"max_samples"`
	MaxConcurrency int            `yaml:"max_concurrency"`
	LookbackDelta  model.Duration `yaml:"lookback_delta"`
	// SplitParallelism is how many parts, each on its own core, a long
	// range query is split into; 0 means one per core (at most 4), 1
	// turns splitting off.
	SplitParallelism int `yaml:"split_parallelism"`
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (c *QueryConfig) UnmarshalYAML(unmarshal func(any) error) error {
	*c = DefaultQueryConfig
	type plain QueryConfig
	if err := unmarshal((*plain)(c)); err != nil {
		return err
	}
	switch {
	case c.Timeout <= 0:
		return fieldErrorf([]string{"timeout"}, "query timeout must be greater than 0")
	case c.MaxSamples <= 0:
		return fieldErrorf([]string{"max_samples"}, "query max_samples must be greater than 0")
	case c.MaxConcurrency <= 0:
		return fieldErrorf([]string{"max_concurrency"}, "query max_concurrency must be greater than 0")
	case c.LookbackDelta <= 0:
		return fieldErrorf([]string{"lookback_delta"}, "query lookback_delta must be greater than 0")
	case c.SplitParallelism < 0:
		return fieldErrorf([]string{"split_parallelism"}, "query split_parallelism must be 0 (one part per core), 1 (no splitting) or more")
	}
	return nil
}
