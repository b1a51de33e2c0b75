package notify

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/aiserve/appliance/notify/message"
)

// Buckets of the bbolt state file that this package owns.
var (
	bucketOutbox   = []byte("notify_outbox")   // seq (8 bytes, big endian) → outboxEntry
	bucketNflog    = []byte("notify_nflog")    // groupKey "\xff" receiver → nflogEntry
	bucketHistory  = []byte("notify_history")  // seq → Delivery, the last maxHistory
	bucketSilences = []byte("notify_silences") // id → Silence
	bucketDigest   = []byte("notify_digest")   // fingerprint → digestEntry; key "\x00next" → next digest time
)

// maxHistory bounds the delivery history the API lists.
const maxHistory = 1000

// outboxEntry is one message to one integration, waiting to be accepted.
type outboxEntry struct {
	Seq uint64 `json:"seq"`
	// Integration is "<receiver>/<type>/<index>", e.g. "chat/webhook/0".
	Integration string           `json:"integration"`
	Receiver    string           `json:"receiver"`
	GroupKey    string           `json:"groupKey"`
	CreatedAt   time.Time        `json:"createdAt"`
	Attempts    int              `json:"attempts"`
	NextAttempt time.Time        `json:"nextAttempt"`
	LastError   string           `json:"lastError,omitempty"`
	Message     *message.Message `json:"message"`
}

// queue is the ordering scope: messages of one group to one integration
// leave in sequence order.
func (e *outboxEntry) queue() string { return e.GroupKey + "\xff" + e.Integration }

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// enqueue writes entries to the outbox within tx, numbering them.
func enqueue(tx *bolt.Tx, es ...*outboxEntry) error {
	b := tx.Bucket(bucketOutbox)
	for _, e := range es {
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		e.Seq = seq
		v, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if err := b.Put(seqKey(seq), v); err != nil {
			return err
		}
	}
	return nil
}

// pending returns the outbox in sequence order.
func pending(db *bolt.DB) ([]*outboxEntry, error) {
	var out []*outboxEntry
	err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketOutbox).ForEach(func(k, v []byte) error {
			var e outboxEntry
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("outbox entry %x: %w", k, err)
			}
			out = append(out, &e)
			return nil
		})
	})
	return out, err
}

// Delivery is one line of the notification history: what was sent, or
// given up, to whom and when.
type Delivery struct {
	At          time.Time `json:"at"`
	Receiver    string    `json:"receiver"`
	Integration string    `json:"integration"`
	GroupKey    string    `json:"groupKey"`
	Kind        string    `json:"kind"`
	Title       string    `json:"title"`
	DedupKey    string    `json:"dedupKey"`
	Result      string    `json:"result"` // sent, failed, silenced, undeliverable
	Attempts    int       `json:"attempts"`
	Error       string    `json:"error,omitempty"`
}

func appendHistory(tx *bolt.Tx, d Delivery) error {
	b := tx.Bucket(bucketHistory)
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	v, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if err := b.Put(seqKey(seq), v); err != nil {
		return err
	}
	if seq > maxHistory {
		c := b.Cursor()
		for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) <= seq-maxHistory; k, _ = c.Next() {
			if err := c.Delete(); err != nil {
				return err
			}
		}
	}
	return nil
}

// History returns the last deliveries, newest first, at most limit (and
// at most the 1000 it keeps).
func (n *Notifier) History(limit int) ([]Delivery, error) {
	limit = min(limit, maxHistory)
	var out []Delivery
	err := n.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketHistory).Cursor()
		for k, v := c.Last(); k != nil && len(out) < limit; k, v = c.Prev() {
			var d Delivery
			if err := json.Unmarshal(v, &d); err != nil {
				return err
			}
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

// nflogEntry is the last notification of a group to a receiver, which the
// repeat and resend decisions read (Alertmanager's nflog entry).
type nflogEntry struct {
	Firing    []string  `json:"firing"`
	Resolved  []string  `json:"resolved"`
	Timestamp time.Time `json:"timestamp"`
}

// nflogRetention is how long a notification log entry is kept after the
// last notification of its group (Alertmanager's --data.retention): a
// group that fires longer refreshes it with every repeat.
const nflogRetention = 120 * time.Hour

// gcNflog deletes the entries last written before cutoff.
func gcNflog(db *bolt.DB, cutoff time.Time) error {
	var old [][]byte
	err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketNflog).ForEach(func(k, v []byte) error {
			var e nflogEntry
			if json.Unmarshal(v, &e) != nil || e.Timestamp.Before(cutoff) {
				old = append(old, append([]byte(nil), k...))
			}
			return nil
		})
	})
	if err != nil || len(old) == 0 {
		return err
	}
	return db.Update(func(tx *bolt.Tx) error {
		for _, k := range old {
			if err := tx.Bucket(bucketNflog).Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

func nflogKey(groupKey, receiver string) []byte { return []byte(groupKey + "\xff" + receiver) }

func readNflog(tx *bolt.Tx, groupKey, receiver string) (*nflogEntry, error) {
	v := tx.Bucket(bucketNflog).Get(nflogKey(groupKey, receiver))
	if v == nil {
		return nil, nil
	}
	var e nflogEntry
	if err := json.Unmarshal(v, &e); err != nil {
		return nil, fmt.Errorf("notification log of %s: %w", groupKey, err)
	}
	return &e, nil
}

func writeNflog(tx *bolt.Tx, groupKey, receiver string, e *nflogEntry) error {
	v, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketNflog).Put(nflogKey(groupKey, receiver), v)
}

// subset reports whether every element of a is in b.
func subset(a, b []string) bool {
	set := make(map[string]bool, len(b))
	for _, x := range b {
		set[x] = true
	}
	for _, x := range a {
		if !set[x] {
			return false
		}
	}
	return true
}

// needsUpdate is Alertmanager's DedupStage decision: notify when alerts
// started firing that the last notification did not have, when alerts
// resolved (if resolved notifications are wanted), and every
// repeatInterval while something fires.
func needsUpdate(e *nflogEntry, firing, resolved []string, sendResolved bool, repeat time.Duration, now time.Time) bool {
	if e == nil {
		return len(firing) > 0
	}
	if !subset(firing, e.Firing) {
		return true
	}
	if len(firing) == 0 {
		// All resolved: the log must learn it even when no integration
		// sends resolved notifications, or a new firing would look old.
		return len(e.Firing) > 0
	}
	if sendResolved && !subset(resolved, e.Resolved) {
		return true
	}
	return !e.Timestamp.Add(repeat).After(now)
}
