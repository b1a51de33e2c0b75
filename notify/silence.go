package notify

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	amlabels "github.com/prometheus/alertmanager/pkg/labels"
	"github.com/prometheus/common/model"
	bolt "go.etcd.io/bbolt"
)

// Silence states, as in Alertmanager.
const (
	SilenceActive  = "active"
	SilencePending = "pending"
	SilenceExpired = "expired"
)

// silenceRetention is how long an expired silence stays listed
// (Alertmanager's --data.retention default).
const silenceRetention = 120 * time.Hour

// Errors of the silence operations that the API turns into status codes.
var (
	ErrSilenceNotFound = errors.New("silence not found")
	ErrSilenceInvalid  = errors.New("invalid silence")
)

// Matcher is a silence matcher in the v2 API's form.
type Matcher struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	IsRegex bool   `json:"isRegex"`
	IsEqual *bool  `json:"isEqual,omitempty"`
}

func (m Matcher) compile() (*amlabels.Matcher, error) {
	eq := m.IsEqual == nil || *m.IsEqual
	t := amlabels.MatchEqual
	switch {
	case m.IsRegex && eq:
		t = amlabels.MatchRegexp
	case m.IsRegex:
		t = amlabels.MatchNotRegexp
	case !eq:
		t = amlabels.MatchNotEqual
	}
	return amlabels.NewMatcher(t, m.Name, m.Value)
}

// Silence mutes the alerts its matchers match between StartsAt and EndsAt.
type Silence struct {
	ID        string    `json:"id"`
	Matchers  []Matcher `json:"matchers"`
	StartsAt  time.Time `json:"startsAt"`
	EndsAt    time.Time `json:"endsAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	CreatedBy string    `json:"createdBy"`
	Comment   string    `json:"comment"`

	compiled amlabels.Matchers
}

// State returns the state of s at now.
func (s *Silence) State(now time.Time) string {
	switch {
	case now.Before(s.StartsAt):
		return SilencePending
	case now.Before(s.EndsAt):
		return SilenceActive
	}
	return SilenceExpired
}

func (s *Silence) compile() error {
	if len(s.Matchers) == 0 {
		return fmt.Errorf("%w: it needs at least one matcher", ErrSilenceInvalid)
	}
	s.compiled = s.compiled[:0]
	for _, m := range s.Matchers {
		if !model.LabelName(m.Name).IsValid() {
			return fmt.Errorf("%w: invalid label name %q", ErrSilenceInvalid, m.Name)
		}
		c, err := m.compile()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrSilenceInvalid, err)
		}
		s.compiled = append(s.compiled, c)
	}
	// Alertmanager refuses silences that match every alert.
	if s.compiled.Matches(model.LabelSet{}) {
		return fmt.Errorf("%w: its matchers match the empty label set, so it would silence every alert", ErrSilenceInvalid)
	}
	return nil
}

// silences holds the silences in memory and in the bucket bucketSilences.
// It has its own lock, so that the API reads and changes silences without
// the notifier's.
//
// Matching is kept off the whole list, as in Alertmanager: expired
// silences leave the index (they stay in byID for the API until
// silenceRetention passes); the index finds the silences that can match a
// label set through one equality matcher of each; and the silences that
// match an alert are cached by its fingerprint, valid while version (bumped
// by every change) stays the same. What matches does not depend on the
// time, only whether a matching silence is active, so a cache entry holds
// the pending and active silences that match and each lookup checks their
// state at the time asked.
type silences struct {
	db *bolt.DB

	mu      sync.RWMutex
	byID    map[string]*Silence // every silence, expired ones included
	idx     silenceIndex        // the pending and active ones
	version uint64

	cacheMu sync.Mutex
	cache   map[model.Fingerprint]silenceCacheEntry
}

// silenceCacheEntry is what matched an alert at a version of the silences.
type silenceCacheEntry struct {
	version uint64
	ids     []string // pending or active silences that match, sorted
}

// silenceIndex finds the pending and active silences that may match a
// label set: by the name and value of one equality matcher of each
// silence, or, for a silence without one, in the list scanned for every
// label set.
type silenceIndex struct {
	byLabel map[model.LabelName]map[model.LabelValue]map[string]*Silence
	scan    map[string]*Silence
}

func newSilenceIndex() silenceIndex {
	return silenceIndex{byLabel: map[model.LabelName]map[model.LabelValue]map[string]*Silence{}, scan: map[string]*Silence{}}
}

// indexKey returns the equality matcher a silence is indexed by: one with
// a non-empty value (an empty one matches alerts without the label).
func indexKey(sil *Silence) (model.LabelName, model.LabelValue, bool) {
	for _, m := range sil.compiled {
		if m.Type == amlabels.MatchEqual && m.Value != "" {
			return model.LabelName(m.Name), model.LabelValue(m.Value), true
		}
	}
	return "", "", false
}

func (x *silenceIndex) add(sil *Silence) {
	ln, lv, ok := indexKey(sil)
	if !ok {
		x.scan[sil.ID] = sil
		return
	}
	vs := x.byLabel[ln]
	if vs == nil {
		vs = map[model.LabelValue]map[string]*Silence{}
		x.byLabel[ln] = vs
	}
	ids := vs[lv]
	if ids == nil {
		ids = map[string]*Silence{}
		vs[lv] = ids
	}
	ids[sil.ID] = sil
}

func (x *silenceIndex) remove(sil *Silence) {
	ln, lv, ok := indexKey(sil)
	if !ok {
		delete(x.scan, sil.ID)
		return
	}
	vs := x.byLabel[ln]
	delete(vs[lv], sil.ID)
	if len(vs[lv]) == 0 {
		delete(vs, lv)
	}
	if len(vs) == 0 {
		delete(x.byLabel, ln)
	}
}

// matching returns the IDs of the indexed silences whose matchers match
// lset, sorted.
func (x *silenceIndex) matching(lset model.LabelSet) []string {
	var ids []string
	for ln, lv := range lset {
		for id, sil := range x.byLabel[ln][lv] {
			if sil.compiled.Matches(lset) {
				ids = append(ids, id)
			}
		}
	}
	for id, sil := range x.scan {
		if sil.compiled.Matches(lset) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

func (x *silenceIndex) len() int {
	n := len(x.scan)
	for _, vs := range x.byLabel {
		for _, ids := range vs {
			n += len(ids)
		}
	}
	return n
}

func loadSilences(db *bolt.DB, now time.Time) (*silences, error) {
	s := &silences{db: db, byID: map[string]*Silence{}, idx: newSilenceIndex(), cache: map[model.Fingerprint]silenceCacheEntry{}}
	err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSilences).ForEach(func(k, v []byte) error {
			var sil Silence
			if err := json.Unmarshal(v, &sil); err != nil {
				return fmt.Errorf("silence %s: %w", k, err)
			}
			if err := sil.compile(); err != nil {
				return fmt.Errorf("silence %s: %w", k, err)
			}
			s.byID[sil.ID] = &sil
			if sil.State(now) != SilenceExpired {
				s.idx.add(&sil)
			}
			return nil
		})
	})
	return s, err
}

// put stores sil; called with s.mu held.
func (s *silences) put(sil *Silence, now time.Time) error {
	b, err := json.Marshal(sil)
	if err != nil {
		return err
	}
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketSilences).Put([]byte(sil.ID), b) }); err != nil {
		return fmt.Errorf("store silence: %w", err)
	}
	if old := s.byID[sil.ID]; old != nil {
		s.idx.remove(old)
	}
	s.byID[sil.ID] = sil
	if sil.State(now) != SilenceExpired {
		s.idx.add(sil)
	}
	s.version++
	return nil
}

// set creates a silence, or updates the one with sil.ID. As in
// Alertmanager, an active silence whose matchers or start change is
// expired and replaced by a new one (so the record of what was silenced
// stays true); a pending one is updated in place.
func (s *silences) set(sil Silence, now time.Time) (string, error) {
	if err := sil.compile(); err != nil {
		return "", err
	}
	if sil.StartsAt.IsZero() || sil.StartsAt.Before(now) {
		sil.StartsAt = now
	}
	if !sil.EndsAt.After(sil.StartsAt) {
		return "", fmt.Errorf("%w: endsAt %s is not after startsAt %s", ErrSilenceInvalid, sil.EndsAt.Format(time.RFC3339), sil.StartsAt.Format(time.RFC3339))
	}
	sil.UpdatedAt = now
	s.mu.Lock()
	defer s.mu.Unlock()
	if sil.ID != "" {
		old, ok := s.byID[sil.ID]
		if !ok {
			return "", fmt.Errorf("%w: %s", ErrSilenceNotFound, sil.ID)
		}
		switch old.State(now) {
		case SilencePending:
			return sil.ID, s.put(&sil, now)
		case SilenceActive:
			if slices.Equal(old.Matchers, sil.Matchers) && !sil.StartsAt.After(old.StartsAt) {
				sil.StartsAt = old.StartsAt
				return sil.ID, s.put(&sil, now)
			}
			if err := s.expireLocked(old.ID, now); err != nil {
				return "", err
			}
		}
	}
	sil.ID = newID()
	return sil.ID, s.put(&sil, now)
}

// expire ends the silence now; a pending one ends before it started, an
// expired one stays as it is.
func (s *silences) expire(id string, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.expireLocked(id, now)
}

func (s *silences) expireLocked(id string, now time.Time) error {
	old, ok := s.byID[id]
	if !ok {
		return fmt.Errorf("%w: %s", ErrSilenceNotFound, id)
	}
	sil := *old
	switch sil.State(now) {
	case SilenceExpired:
		// As Alertmanager: expiring an expired silence changes nothing
		// and is not an error.
		return nil
	case SilencePending:
		sil.StartsAt = now
	}
	sil.EndsAt, sil.UpdatedAt = now, now
	return s.put(&sil, now)
}

// mutes returns the IDs of the active silences that match lset, the
// labels of the alert fp, sorted. It costs a map lookup while no silence
// changed since the last call for fp.
func (s *silences) mutes(fp model.Fingerprint, lset model.LabelSet, now time.Time) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.cacheMu.Lock()
	e, ok := s.cache[fp]
	s.cacheMu.Unlock()
	if !ok || e.version != s.version {
		e = silenceCacheEntry{version: s.version, ids: s.idx.matching(lset)}
		s.cacheMu.Lock()
		s.cache[fp] = e
		s.cacheMu.Unlock()
	}
	var ids []string
	for _, id := range e.ids {
		if sil := s.byID[id]; sil != nil && sil.State(now) == SilenceActive {
			ids = append(ids, id)
		}
	}
	return ids
}

// forget drops what is cached for the alert fp.
func (s *silences) forget(fp model.Fingerprint) {
	s.cacheMu.Lock()
	delete(s.cache, fp)
	s.cacheMu.Unlock()
}

// get returns a copy of the silence with this ID.
func (s *silences) get(id string) (Silence, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sil, ok := s.byID[id]
	if !ok {
		return Silence{}, false
	}
	return *sil, true
}

// list returns copies of all silences, newest first.
func (s *silences) list() []Silence {
	s.mu.RLock()
	out := make([]Silence, 0, len(s.byID))
	for _, sil := range s.byID {
		out = append(out, *sil)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].UpdatedAt.After(out[j].UpdatedAt) })
	return out
}

// gc takes the silences that expired out of the index, and deletes those
// expired for longer than silenceRetention.
func (s *silences) gc(now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ended []*Silence
	collect := func(m map[string]*Silence) {
		for _, sil := range m {
			if sil.State(now) == SilenceExpired {
				ended = append(ended, sil)
			}
		}
	}
	collect(s.idx.scan)
	for _, vs := range s.idx.byLabel {
		for _, ids := range vs {
			collect(ids)
		}
	}
	for _, sil := range ended {
		s.idx.remove(sil)
	}
	var old []string
	for id, sil := range s.byID {
		if sil.State(now) == SilenceExpired && now.Sub(sil.EndsAt) > silenceRetention {
			old = append(old, id)
		}
	}
	if len(old) == 0 {
		return nil
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, id := range old {
			if err := tx.Bucket(bucketSilences).Delete([]byte(id)); err != nil {
				return err
			}
			delete(s.byID, id)
		}
		return nil
	})
}

// newID returns a random UUID (version 4), the form of Alertmanager's
// silence IDs.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
