package storage

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/metadata"
	"go.etcd.io/bbolt"
)

// metadataBucket is the storage package's bucket in the state file: metric
// family name -> JSON array of {type, unit, help}, most recent first.
var metadataBucket = []byte("storage.metadata")

// maxMetadataVariants is how many different metadata one family keeps. Two
// targets exposing the same family with different HELP strings would
// otherwise overwrite each other, and rewrite the state file, every scrape.
const maxMetadataVariants = 4

type metaUpdate struct {
	family string
	m      metadata.Metadata
}

type metaEntry struct {
	family   string
	variants []metadata.Metadata // most recent first
}

// metadataStore keeps metric family metadata in memory and in bbolt.
type metadataStore struct {
	state  *bbolt.DB
	logger *slog.Logger

	mu sync.RWMutex
	m  map[string]*metaEntry
}

type metadataJSON struct {
	Type string `json:"type"`
	Unit string `json:"unit,omitempty"`
	Help string `json:"help,omitempty"`
}

func loadMetadata(state *bbolt.DB, logger *slog.Logger) (*metadataStore, error) {
	s := &metadataStore{state: state, logger: logger, m: make(map[string]*metaEntry)}
	err := state.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(metadataBucket)
		if err != nil {
			return err
		}
		return b.ForEach(func(k, v []byte) error {
			var js []metadataJSON
			if err := json.Unmarshal(v, &js); err != nil {
				// One bad record must not stop the appliance; it is
				// rewritten on the next scrape of that family.
				logger.Warn("skipping unreadable metric metadata", "family", string(k), "err", err)
				return nil
			}
			e := &metaEntry{family: string(k)}
			for _, j := range js {
				e.variants = append(e.variants, metadata.Metadata{Type: model.MetricType(j.Type), Unit: j.Unit, Help: j.Help})
			}
			s.m[e.family] = e
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("load metric metadata: %w", err)
	}
	return s, nil
}

// same reports whether m is already stored for family, and returns the
// store's own copy of the family name (safe to keep).
func (s *metadataStore) same(family string, m metadata.Metadata) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.m[family]
	if !ok {
		return "", false
	}
	return e.family, slices.Contains(e.variants, m)
}

// set records updates in memory and persists the families that changed in
// one bbolt transaction.
func (s *metadataStore) set(updates []metaUpdate) error {
	s.mu.Lock()
	var changed []*metaEntry
	for _, u := range updates {
		e, ok := s.m[u.family]
		if !ok {
			e = &metaEntry{family: u.family}
			s.m[u.family] = e
		}
		if i := slices.Index(e.variants, u.m); i == 0 {
			continue
		} else if i > 0 {
			e.variants = slices.Delete(e.variants, i, i+1)
		} else if len(e.variants) >= maxMetadataVariants {
			e.variants = e.variants[:maxMetadataVariants-1]
		}
		e.variants = slices.Insert(e.variants, 0, u.m)
		if !slices.Contains(changed, e) {
			changed = append(changed, e)
		}
	}
	// Encode under the lock, write outside it.
	type kv struct{ k, v []byte }
	recs := make([]kv, 0, len(changed))
	for _, e := range changed {
		js := make([]metadataJSON, len(e.variants))
		for i, m := range e.variants {
			js[i] = metadataJSON{Type: string(m.Type), Unit: m.Unit, Help: m.Help}
		}
		v, err := json.Marshal(js)
		if err != nil {
			s.mu.Unlock()
			return err
		}
		recs = append(recs, kv{[]byte(e.family), v})
	}
	s.mu.Unlock()
	if len(recs) == 0 {
		return nil
	}
	return s.state.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(metadataBucket)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := b.Put(r.k, r.v); err != nil {
				return err
			}
		}
		return nil
	})
}

// SetMetadata records metadata for a metric family (the text importer calls
// it for # TYPE, # HELP and # UNIT lines). It is persisted at once.
func (db *DB) SetMetadata(family string, m metadata.Metadata) {
	if family == "" || m == (metadata.Metadata{}) {
		return
	}
	if _, same := db.meta.same(family, m); same {
		return
	}
	if db.readLock() != nil {
		return
	}
	defer db.readUnlock()
	if err := db.meta.set([]metaUpdate{{family: strings.Clone(family), m: m}}); err != nil {
		db.logger.Warn("cannot persist metric metadata", "family", family, "err", err)
	}
}

// Metadata returns metadata per metric family with the semantics of
// Prometheus' /api/v1/metadata: metric "" means all families, limit bounds
// the number of families and limitPerMetric the entries per family (<= 0:
// unlimited). Families are taken in name order, so limits are deterministic.
func (db *DB) Metadata(metric string, limit, limitPerMetric int) map[string][]metadata.Metadata {
	s := db.meta
	s.mu.RLock()
	defer s.mu.RUnlock()
	res := make(map[string][]metadata.Metadata)
	add := func(e *metaEntry) {
		v := e.variants
		if limitPerMetric > 0 && len(v) > limitPerMetric {
			v = v[:limitPerMetric]
		}
		res[e.family] = slices.Clone(v)
	}
	if metric != "" {
		if e, ok := s.m[metric]; ok {
			add(e)
		}
		return res
	}
	names := make([]string, 0, len(s.m))
	for name := range s.m {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if limit > 0 && len(res) >= limit {
			break
		}
		add(s.m[name])
	}
	return res
}

// familyFromName derives the metric family from a series name when the
// caller did not pass it: histogram and summary series carry suffixes their
// family does not.
func familyFromName(name string, typ model.MetricType) string {
	var suffixes []string
	switch typ {
	case model.MetricTypeHistogram, model.MetricTypeGaugeHistogram:
		suffixes = []string{"_bucket", "_sum", "_count", "_created", "_gcount", "_gsum"}
	case model.MetricTypeSummary:
		suffixes = []string{"_sum", "_count", "_created"}
	default:
		return name
	}
	for _, s := range suffixes {
		if f, ok := strings.CutSuffix(name, s); ok {
			return f
		}
	}
	return name
}
