package notify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"maps"
	"slices"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/aiserve/appliance/notify/message"
)

// Keys of the digest bucket that are not alerts start with 0x00, which no
// fingerprint (16 hex digits) does.
var (
	digestNextKey = []byte("\x00next") // the next digest time, RFC 3339
	digestSpecKey = []byte("\x00spec") // "HH:MM zone" the next time was computed for
)

// digestEntry is what the digest remembers of one alert since the last
// digest.
type digestEntry struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	// Count is how many times it started firing.
	Count int `json:"count"`
	// StartsAt is the start of the episode seen last; Firing whether it
	// still fires; Total the time of the earlier, ended episodes.
	StartsAt time.Time     `json:"startsAt"`
	EndsAt   time.Time     `json:"endsAt"`
	Firing   bool          `json:"firing"`
	Total    time.Duration `json:"total"`
}

// recordDigest notes a flush of a digest route.
func (n *Notifier) recordDigest(alerts []message.Alert, now time.Time) error {
	return n.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketDigest)
		for _, a := range alerts {
			var e digestEntry
			if v := b.Get([]byte(a.Fingerprint)); v != nil {
				if err := json.Unmarshal(v, &e); err != nil {
					return fmt.Errorf("digest entry %s: %w", a.Fingerprint, err)
				}
			}
			firing := a.Status == "firing"
			switch {
			case e.Count == 0 || (!a.StartsAt.Equal(e.StartsAt) && firing && !e.Firing):
				// A new episode.
				e.Count++
				e.StartsAt, e.Firing = a.StartsAt, firing
				if !firing {
					e.Total += a.EndsAt.Sub(a.StartsAt)
				}
			case e.Firing && !firing:
				e.Firing = false
				e.Total += a.EndsAt.Sub(e.StartsAt)
			}
			e.Labels, e.Annotations, e.EndsAt = a.Labels, a.Annotations, a.EndsAt
			v, err := json.Marshal(&e)
			if err != nil {
				return err
			}
			if err := b.Put([]byte(a.Fingerprint), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// NextDigest returns the first time after t that is hh:mm in loc. On a day
// when hh:mm does not exist (a clock jump forward over it), it is the time
// Go's time.Date normalises it to, an hour later.
func NextDigest(t time.Time, hh, mm int, loc *time.Location) time.Time {
	lt := t.In(loc)
	c := time.Date(lt.Year(), lt.Month(), lt.Day(), hh, mm, 0, 0, loc)
	if !c.After(t) {
		c = time.Date(lt.Year(), lt.Month(), lt.Day()+1, hh, mm, 0, 0, loc)
	}
	return c
}

// scheduleDigest loads the next digest time, or computes it when there is
// none or the digest's time of day changed. A time that passed while the
// appliance was down is kept, so the digest goes out at once.
func (n *Notifier) scheduleDigest(now time.Time, loc *time.Location) error {
	hh, mm, _ := n.cfg.Digest.Clock()
	spec := fmt.Sprintf("%02d:%02d %s", hh, mm, loc.String())
	return n.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketDigest)
		if string(b.Get(digestSpecKey)) == spec {
			if t, err := time.Parse(time.RFC3339Nano, string(b.Get(digestNextKey))); err == nil {
				n.nextDigest = t
				return nil
			}
		}
		next := NextDigest(now, hh, mm, loc)
		n.nextDigest = next
		if err := b.Put(digestSpecKey, []byte(spec)); err != nil {
			return err
		}
		return b.Put(digestNextKey, []byte(next.UTC().Format(time.RFC3339Nano)))
	})
}

// maybeSendDigest sends the digest if its time has come. It is written to
// the outbox, like every notification, and the entries of alerts that no
// longer fire are dropped in the same transaction.
func (n *Notifier) maybeSendDigest(now time.Time) error {
	loc, err := n.cfg.Digest.Location()
	if err != nil {
		return err
	}
	if n.nextDigest.After(now) {
		return nil
	}
	hh, mm, _ := n.cfg.Digest.Clock()
	next := NextDigest(now, hh, mm, loc)
	defer func() { n.nextDigest = next }()
	return n.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketDigest)
		if err := b.Put(digestNextKey, []byte(next.UTC().Format(time.RFC3339Nano))); err != nil {
			return err
		}
		entries, err := readDigestEntries(b)
		if err != nil || len(entries) == 0 {
			return err
		}
		var outbox []*outboxEntry
		for _, rname := range n.cfg.Digest.DigestReceivers() {
			ints, ok := n.receivers[rname]
			if !ok {
				n.warnOnce("digest:"+rname, "the digest goes to a receiver that is not defined; define it under alerting.receivers or set alerting.digest.receivers", "receiver", rname)
				continue
			}
			for _, in := range ints {
				m := n.digestMessage(entries, rname, in.name, now, loc)
				outbox = append(outbox, &outboxEntry{Integration: in.name, Receiver: rname, GroupKey: "digest", CreatedAt: now, NextAttempt: now, Message: m})
			}
		}
		if err := enqueue(tx, outbox...); err != nil {
			return err
		}
		// Start the next day's count: alerts still firing stay, as one
		// ongoing episode; the rest are forgotten.
		for fp, e := range entries {
			if !e.Firing {
				if err := b.Delete([]byte(fp)); err != nil {
					return err
				}
				continue
			}
			e.Count, e.Total = 1, 0
			v, err := json.Marshal(e)
			if err != nil {
				return err
			}
			if err := b.Put([]byte(fp), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// digestMessage renders the digest: per job, each alert with how often it
// fired, for how long in all, and whether it still fires.
func (n *Notifier) digestMessage(entries map[string]*digestEntry, receiver, integ string, now time.Time, loc *time.Location) *message.Message {
	byJob := map[string][]string{}
	var alerts []message.Alert
	firing := 0
	for fp, e := range entries {
		byJob[e.Labels["job"]] = append(byJob[e.Labels["job"]], fp)
		st := "resolved"
		if e.Firing {
			st = "firing"
			firing++
		}
		alerts = append(alerts, message.Alert{Status: st, Labels: e.Labels, Annotations: e.Annotations, StartsAt: e.StartsAt, EndsAt: e.EndsAt, Fingerprint: fp})
	}
	message.SortAlerts(alerts)
	m := n.newMessage(message.KindDigest, receiver, "digest", nil, alerts, integ, now)
	m.Title = fmt.Sprintf("Daily digest %s: %d alerts, %d still firing", now.In(loc).Format("2006-01-02"), len(entries), firing)
	var b bytes.Buffer
	for _, job := range slices.Sorted(maps.Keys(byJob)) {
		name := job
		if name == "" {
			name = "(no job)"
		}
		fmt.Fprintf(&b, "**%s**\n", name)
		fps := byJob[job]
		sort.Slice(fps, func(i, j int) bool {
			ei, ej := entries[fps[i]], entries[fps[j]]
			if ei.Labels["alertname"] != ej.Labels["alertname"] {
				return ei.Labels["alertname"] < ej.Labels["alertname"]
			}
			return fps[i] < fps[j]
		})
		for _, fp := range fps {
			e := entries[fp]
			total := e.Total
			state := "resolved"
			if e.Firing {
				total += now.Sub(e.StartsAt)
				state = "still firing since " + e.StartsAt.In(loc).Format("2006-01-02 15:04 MST")
			}
			what := e.Annotations["summary"]
			if what == "" {
				what = e.Labels["alertname"]
			}
			inst := ""
			if i := e.Labels["instance"]; i != "" {
				inst = " on " + i
			}
			fmt.Fprintf(&b, "- %s%s: fired %d×, %s in all, %s\n", what, inst, e.Count, total.Round(time.Minute), state)
		}
		b.WriteString("\n")
	}
	m.Text = b.String()
	m.HTML = "<html><body><h2>" + html.EscapeString(m.Title) + "</h2><pre>" + html.EscapeString(m.Text) + "</pre></body></html>"
	return m
}

// readDigestEntries returns the alerts the digest bucket b holds, by
// fingerprint (the keys starting with a zero byte are not alerts).
func readDigestEntries(b *bolt.Bucket) (map[string]*digestEntry, error) {
	entries := map[string]*digestEntry{}
	err := b.ForEach(func(k, v []byte) error {
		if bytes.HasPrefix(k, []byte{0}) {
			return nil
		}
		var e digestEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return fmt.Errorf("digest entry %s: %w", k, err)
		}
		entries[string(k)] = &e
		return nil
	})
	return entries, err
}
