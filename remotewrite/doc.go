// Package remotewrite sends every sample the appliance stores to the
// remote_write endpoints of the config (Prometheus' remote write 1.0 or
// 2.0), through a durable queue per remote in the data dir, so that a
// remote that is down, or an appliance restarted meanwhile (kill -9
// included), loses nothing within the queue's disk bound.
//
// Data flow:
//
//	storage Commit ─► Manager.Committed (storage.CommitSink)
//	                    └─► per remote: external labels, write_relabel_configs,
//	                        queue (<data>/remote_write/<name>/, Prometheus' wlog)
//	                    sender goroutine ─► batches ─► Prometheus' remote write
//	                        client (storage/remote: headers, auth, TLS, version)
//
// The queue is a directory of Prometheus' tsdb/wlog segments (32 KiB pages
// with CRCs, snappy) holding tsdb/record series and samples records. Each
// segment names every series its samples use, so a segment is readable on
// its own: the oldest can be dropped when the queue passes max_disk_bytes
// (counted in prometheus_remote_storage_samples_dropped_total, with a
// warning) and the sender can resume at any segment. The sender's position
// (segment, records sent) is kept in the file "ack" next to them, written
// at most once a second while requests are answered, and whenever a
// segment is finished or the queue closes; a restart resends from there,
// so delivery is at least once (up to a second of requests again after a
// crash). Segments fully sent are deleted.
//
// Durability matches the storage's write-ahead log: every Commit writes
// its samples to the queue (to the OS, which survives kill -9) before
// Commit returns, and a commit the caller asked to fsync (HTTP ingest,
// storage.WithSyncCommit) fsyncs the queue too.
//
// Why not VictoriaMetrics' lib/persistentqueue (vmagent's): it buffers
// writes in the process and writes its offsets at most once a second, and
// the block a sender is retrying has left the queue already; kill -9 then
// loses up to a second of samples and the block in flight. Why not
// Prometheus' QueueManager: it reads Prometheus' own TSDB WAL through its
// watcher and keeps the samples of an outage in memory only. The wlog is
// the part of Prometheus built for this, and its client does the HTTP.
//
// Sending: one request at a time per remote, in order, up to
// queue_config.max_samples_per_send samples, after batch_send_deadline at
// the latest; 5xx, network errors and (with retry_on_http_429, on by
// default here) 429 are retried with backoff from min_backoff doubling to
// max_backoff until they succeed; any other answer counts the samples as
// failed and moves on. An unreachable remote never blocks ingest: Commit
// only writes the local queue.
package remotewrite
