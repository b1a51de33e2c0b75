package notify

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/aiserve/appliance/notify/message"
)

// bucketOnce holds the keys EnqueueOnce has enqueued: key → time.
var bucketOnce = []byte("notify_once")

// ErrUnknownReceiver is returned (wrapped) by EnqueueOnce for a receiver
// that alerting.receivers does not define.
var ErrUnknownReceiver = errors.New("receiver is not defined in alerting.receivers")

// EnqueueOnce writes a message built by build to the outbox for every
// integration of each receiver, unless key was enqueued before; it
// reports whether it enqueued. The key is recorded in the same
// transaction as the messages, so a caller that crashes after the call
// and calls again after the restart enqueues nothing twice, and the
// outbox delivers what it holds as it does for alerts: retried while a
// receiver is down, in order, until give_up_after. The weekly SLO report
// goes out this way.
//
// build is called once per integration and must return a new message; its
// Kind, Receiver, GroupKey, DedupKey and At are set here (GroupKey is key).
func (n *Notifier) EnqueueOnce(key string, receivers []string, build func(receiver string) *message.Message) (bool, error) {
	now := n.now()
	n.mu.Lock()
	var entries []*outboxEntry
	for _, r := range receivers {
		ints, ok := n.receivers[r]
		if !ok {
			n.mu.Unlock()
			return false, fmt.Errorf("%w: %q", ErrUnknownReceiver, r)
		}
		for _, in := range ints {
			m := build(r)
			m.Receiver, m.GroupKey, m.At = r, key, now
			if m.Kind == "" {
				m.Kind = message.KindReport
			}
			if m.ExternalURL == "" {
				m.ExternalURL = n.opts.ExternalURL
			}
			h := sha256.Sum256([]byte(key + "\xff" + in.name))
			m.DedupKey = hex.EncodeToString(h[:12])
			entries = append(entries, &outboxEntry{Integration: in.name, Receiver: r, GroupKey: key, CreatedAt: now, NextAttempt: now, Message: m})
		}
	}
	n.mu.Unlock()
	enqueued := false
	err := n.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketOnce)
		if err != nil {
			return err
		}
		if b.Get([]byte(key)) != nil {
			return nil
		}
		if err := enqueue(tx, entries...); err != nil {
			return err
		}
		enqueued = true
		return b.Put([]byte(key), []byte(now.UTC().Format("2006-01-02T15:04:05Z07:00")))
	})
	if err != nil {
		return false, fmt.Errorf("enqueue %s: %w", key, err)
	}
	return enqueued, nil
}
