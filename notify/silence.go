package notify

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
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
// Its methods are called with the notifier's lock held.
type silences struct {
	db   *bolt.DB
	byID map[string]*Silence
}

func loadSilences(db *bolt.DB) (*silences, error) {
	s := &silences{db: db, byID: map[string]*Silence{}}
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
			return nil
		})
	})
	return s, err
}

func (s *silences) put(sil *Silence) error {
	b, err := json.Marshal(sil)
	if err != nil {
		return err
	}
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketSilences).Put([]byte(sil.ID), b) }); err != nil {
		return fmt.Errorf("store silence: %w", err)
	}
	s.byID[sil.ID] = sil
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
	if sil.ID != "" {
		old, ok := s.byID[sil.ID]
		if !ok {
			return "", fmt.Errorf("%w: %s", ErrSilenceNotFound, sil.ID)
		}
		switch old.State(now) {
		case SilencePending:
			return sil.ID, s.put(&sil)
		case SilenceActive:
			if slices.Equal(old.Matchers, sil.Matchers) && !sil.StartsAt.After(old.StartsAt) {
				sil.StartsAt = old.StartsAt
				return sil.ID, s.put(&sil)
			}
			if err := s.expire(old.ID, now); err != nil {
				return "", err
			}
		}
	}
	sil.ID = newID()
	return sil.ID, s.put(&sil)
}

// expire ends the silence now; a pending one ends before it started.
func (s *silences) expire(id string, now time.Time) error {
	old, ok := s.byID[id]
	if !ok {
		return fmt.Errorf("%w: %s", ErrSilenceNotFound, id)
	}
	sil := *old
	switch sil.State(now) {
	case SilenceExpired:
		return fmt.Errorf("%w: silence %s already expired", ErrSilenceInvalid, id)
	case SilencePending:
		sil.StartsAt = now
	}
	sil.EndsAt, sil.UpdatedAt = now, now
	return s.put(&sil)
}

// mutes returns the IDs of the active silences that match lset.
func (s *silences) mutes(lset model.LabelSet, now time.Time) []string {
	var ids []string
	for id, sil := range s.byID {
		if sil.State(now) == SilenceActive && sil.compiled.Matches(lset) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// list returns copies of all silences, newest first.
func (s *silences) list() []Silence {
	out := make([]Silence, 0, len(s.byID))
	for _, sil := range s.byID {
		out = append(out, *sil)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UpdatedAt.After(out[j].UpdatedAt) })
	return out
}

// gc deletes silences expired for longer than silenceRetention.
func (s *silences) gc(now time.Time) error {
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
