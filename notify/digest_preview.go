package notify

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/aiserve/appliance/notify/message"
)

// DigestPreview is what the next daily digest holds so far.
type DigestPreview struct {
	// At is when it is sent next; zero before the first Apply.
	At time.Time
	// AsOf is the time the message is rendered for ("fired for how long
	// in all" counts up to it).
	AsOf time.Time
	// Receivers are the receivers it goes to.
	Receivers []string
	// Message is the digest as it would read if sent at AsOf; nil when it
	// holds no alert, and so would not be sent.
	Message *message.Message
}

// DigestPreview renders the next digest from what it has recorded so far,
// without sending it or changing anything.
func (n *Notifier) DigestPreview() (DigestPreview, error) {
	n.mu.RLock()
	p := DigestPreview{At: n.nextDigest, AsOf: n.now(), Receivers: n.cfg.Digest.DigestReceivers()}
	digest := n.cfg.Digest
	n.mu.RUnlock()
	loc, err := digest.Location()
	if err != nil {
		return p, fmt.Errorf("digest timezone: %w", err)
	}
	var entries map[string]*digestEntry
	err = n.db.View(func(tx *bolt.Tx) error {
		entries, err = readDigestEntries(tx.Bucket(bucketDigest))
		return err
	})
	if err != nil || len(entries) == 0 {
		return p, err
	}
	p.Message = n.digestMessage(entries, "", "preview", p.AsOf, loc)
	return p, nil
}
