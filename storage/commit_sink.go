package storage

import (
	"fmt"

	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
	"github.com/prometheus/prometheus/model/labels"
)

// CommitSink receives every sample the storage commits: scraped, probed,
// pushed (remote write, imports), recorded by rules, local readings. All
// of them pass Commit, so a sink set here misses no source. Remote write
// out (package remotewrite) is the sink.
//
// Committed runs inside Commit, after the write-ahead log has the batch
// and before Commit returns, so that what a caller was told is stored is
// also in the sink; it must not wait on the network. Samples replayed from
// the write-ahead log at start are not passed again: their first Commit
// did. The batch is valid only during the call.
type CommitSink interface {
	Committed(b *CommitBatch)
}

// SetCommitSink sets the sink of every later Commit (nil: none). Set it
// before input starts.
func (db *DB) SetCommitSink(s CommitSink) {
	if s == nil {
		db.sink.Store(nil)
		return
	}
	db.sink.Store(&s)
}

// CommitBatch is one Commit's accepted samples.
type CommitBatch struct {
	rows []vmstorage.MetricRow
	refs []uint64
	// Sync says the caller asked for an fsync before Commit returns
	// (WithSyncCommit): a sink that keeps the batch on disk syncs too.
	Sync bool
	mn   vmstorage.MetricName
}

// Len is the number of samples.
func (b *CommitBatch) Len() int { return len(b.rows) }

// Ref is sample i's series reference: the same for the same labels for
// the life of the process.
func (b *CommitBatch) Ref(i int) uint64 { return b.refs[i] }

// Sample is sample i's timestamp (ms) and value.
func (b *CommitBatch) Sample(i int) (int64, float64) {
	return b.rows[i].Timestamp, b.rows[i].Value
}

// Labels decodes sample i's labels into sb. It costs a decoding: call it
// once per series, keyed by Ref.
func (b *CommitBatch) Labels(i int, sb *labels.ScratchBuilder) (labels.Labels, error) {
	if err := b.mn.UnmarshalRaw(b.rows[i].MetricNameRaw); err != nil {
		return labels.EmptyLabels(), fmt.Errorf("series name: %w", err)
	}
	return metricNameToLabels(sb, &b.mn), nil
}

// teeCommit hands the accepted rows of a commit to the sink, if any.
func (db *DB) teeCommit(a *appender, rows []vmstorage.MetricRow, refs []uint64) {
	p := db.sink.Load()
	if p == nil || a.replay || len(rows) == 0 {
		return
	}
	b := &a.batch
	b.rows, b.refs, b.Sync = rows, refs, a.sync
	(*p).Committed(b)
	b.rows, b.refs = nil, nil
}
