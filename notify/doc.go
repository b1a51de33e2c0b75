// Package notify turns alerts into notifications with Alertmanager's
// semantics, inside the appliance: a route tree (matchers, continue,
// group_by, group_wait, group_interval, repeat_interval, mute and active
// time intervals), inhibit rules, silences, plus what Alertmanager does not
// have: a daily digest for P2 alerts and a durable outbox.
//
// # Basics
//
// Alerts come in through Send (the rules part: Prometheus' *notifier.Alert,
// the shape of the rules manager's NotifyFunc) or PostAlerts (the v2 API:
// alerts from an external Prometheus or vmalert). Each alert goes to the
// aggregation groups of the routes it matches. A group flushes group_wait
// after it was created and then every group_interval; a flush leaves out
// silenced and inhibited alerts, consults the notification log (the
// previous notification of the group to that receiver) and, when something
// changed or repeat_interval passed, writes one message per integration to
// the outbox. Routes with digest: true record their alerts for the daily
// digest instead.
//
// The outbox is a bbolt bucket. A message is written there, in the same
// transaction as the notification log entry, before any attempt to send
// it, and is deleted only when the receiver accepted it. A failed attempt
// is retried with doubling backoff (alerting.outbox) until give_up_after,
// then it is dropped, logged as failed and counted. Messages of one group
// to one integration leave in the order they were written: a later one
// waits until the earlier one is delivered or given up.
//
// The package serves no HTTP. Alertmanager's v2 API (/api/v2) is package
// ui's, over the data this package exposes (api.go): Alerts with an
// AlertFilter, AlertGroups, PostAlerts, Silences, Silence, SetSilence,
// ExpireSilence, Status, Receivers and History, which ui reads through its
// NotifyRetriever interface. Alertmanager's semantics stay here: which
// alerts a filter selects, which silences a filter matches, the defaults
// and validation of a posted alert, the order of the lists. net/http is
// used only as a client, to deliver to receivers.
//
// Nothing here reads the wall clock: Options.Now is the clock, and Tick
// does all the work that is due at that time. Run calls Tick every
// Options.TickInterval, and at once when a new group has group_wait 0s
// (so such an alert is not held up to a tick); tests call Tick after
// moving their clock.
//
// # Scale
//
// Thousands of alerts and silences cost what they cost in Alertmanager.
// Silences are indexed by one equality matcher each (expired ones leave the
// index, and stay listed until their retention ends), and what matches an
// alert is cached by its fingerprint until a silence changes. Inhibit
// rules index their source alerts by the values of the equal labels, so
// an alert is checked in O(rules). The notifier's lock is held for writing
// only for work in memory (a post; what a flush decides), the database is
// written after it (one transaction per tick for all the flushes), the API
// reads under it held for reading, and silences have a lock of their own.
// BenchmarkFlushAtScale and e2e's TestNotifyAtScale (5,000 alerts, 10,000
// silences) keep it so.
//
// # Caveats
//
//   - A message that was sent but whose deletion did not reach the disk
//     (kill -9 between the two) is sent again after the restart, once,
//     with the same dedup key (the webhook passes it as a header).
//   - Alerts themselves are kept in memory. The rules part re-sends its
//     firing alerts every evaluation interval and restores its state after
//     a restart, so groups rebuild within one interval; the notification
//     log, which survives, stops that from re-notifying what was already
//     sent.
//   - Delivery is sequential within a Tick; a receiver that hangs delays
//     the others by at most deliver.Timeout per message.
package notify
