package storage

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ErrDiskFull is returned by Commit (and by DB.IngestError) while the free
// space of the data directory's filesystem is below Options.MinFreeDisk.
// It is retryable: the sender keeps its data and tries again later; the
// HTTP layer answers 503. The wrapped message names the free bytes and the
// limit.
var ErrDiskFull = errors.New("storage is read-only: free disk space is below storage.min_free_disk")

// DefaultMinFreeDisk is the free-disk watermark when Options.MinFreeDisk is
// 0: VictoriaMetrics' own -storage.minFreeDiskSpaceBytes default (100 MB in
// v1.151; 10 MB in older releases). 100 MB is a few minutes of a busy
// box's WAL and merge output, so in-flight merges and flushes of samples
// already acknowledged fit below it.
const DefaultMinFreeDisk = 100_000_000

// diskCheckInterval is how long a free-space figure is trusted.
const diskCheckInterval = 250 * time.Millisecond

// diskPendingSeconds is how long a commit's estimated bytes count against
// the free space on top of what statfs says: VictoriaMetrics keeps rows
// and index items in memory for up to 2 s + 5 s (plus the time a flush
// takes) before their files show in statfs, and that delay let a fill
// outrun the watermark in the tmpfs test, and its pending rows were seen
// to wait longer than 10 s on a nearly full disk, so they count for 30 s.
// Counting them twice once they are written errs on the side of refusing
// early.
const diskPendingSeconds = 30

// diskGuard is the free-disk watermark of one DB. Below the watermark
// Commit refuses new samples with ErrDiskFull; above it again they are
// taken again, without operator action.
type diskGuard struct {
	path    string
	minFree uint64
	// freeBytes reads the free space of path's filesystem; statfs unless
	// a test injects another source.
	freeBytes func(path string) (uint64, error)
	now       func() time.Time

	mu        sync.Mutex
	checkedAt time.Time
	free      uint64 // statfs at checkedAt
	// pending are the bytes commits booked, per second, over the last
	// diskPendingSeconds (a ring indexed by the Unix second).
	pending  [diskPendingSeconds]diskPending
	readOnly atomic.Bool
	// entered is set when the guard turns read-only, until takeEntered.
	entered  atomic.Bool
	lastFree atomic.Uint64

	rejected prometheus.Counter
}

func newDiskGuard(path string, minFree int64, freeBytes func(string) (uint64, error)) *diskGuard {
	if minFree == 0 {
		minFree = DefaultMinFreeDisk
	}
	if minFree < 0 {
		minFree = 0 // watermark off
	}
	if freeBytes == nil {
		freeBytes = statfsFree
	}
	return &diskGuard{
		path: path, minFree: uint64(minFree), freeBytes: freeBytes, now: time.Now,
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "appliance_storage_disk_full_rejected_samples_total",
			Help: "Samples refused because free disk space was below storage.min_free_disk.",
		}),
	}
}

// statfsFree is the space an unprivileged process may still write (Bavail,
// not Bfree: root's reserved blocks do not count).
func statfsFree(path string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// reserve checks that n more bytes can be written without going below the
// watermark and books them against the cached figure. It returns ErrDiskFull
// (wrapped with the figures) when they cannot. The appliance's own samples
// (self) may go down to half of the watermark: a few KB a scrape, so that
// the self-alert sees appliance_storage_read_only.
func (g *diskGuard) reserve(n uint64, self bool) error {
	if g.minFree == 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if g.checkedAt.IsZero() || now.Sub(g.checkedAt) >= diskCheckInterval {
		free, err := g.freeBytes(g.path)
		if err != nil {
			// Unknown free space: keep taking data rather than refuse
			// everything on a statfs hiccup; VictoriaMetrics' own
			// watcher still stops its merges.
			return nil
		}
		g.free, g.checkedAt = free, now
		g.lastFree.Store(free)
	}
	pending := g.pendingLocked(now)
	free := g.free - min(g.free, pending)
	limit := g.minFree
	if g.readOnly.Load() {
		// Hysteresis: once read-only, ingest resumes 10% above the
		// watermark, so that it does not flap between 503 and 2xx (and
		// /-/ready between 503 and 200) at the boundary.
		limit += g.minFree / 10
	}
	if free < limit+n {
		if !g.readOnly.Swap(true) {
			g.entered.Store(true)
		}
		// The self-scrape is judged on the free space last read, not on
		// it less the bookings: those are estimates of what ingest already
		// accepted will take, and counting them here refused the
		// self-scrape (so the P0 self-alert never saw
		// appliance_storage_read_only) while the disk still had twice the
		// half-watermark free (seen in e2e TestDiskFullTurnsReadOnly:
		// 29.8 MB free, 23.7 MB booked, half-watermark 12.6 MB).
		if self && g.free >= g.minFree/2+n {
			g.bookLocked(now, n)
			return nil
		}
		return fmt.Errorf("%w: %d bytes free (%d more being written), limit %d bytes (storage.min_free_disk); free space on %s or raise it to resume",
			ErrDiskFull, g.free, pending, g.minFree, g.path)
	}
	g.readOnly.Store(false)
	g.bookLocked(now, n)
	return nil
}

type diskPending struct {
	sec   int64
	bytes uint64
}

func (g *diskGuard) pendingLocked(now time.Time) uint64 {
	sec := now.Unix()
	var sum uint64
	for _, p := range g.pending {
		if p.sec > sec-diskPendingSeconds {
			sum += p.bytes
		}
	}
	return sum
}

func (g *diskGuard) bookLocked(now time.Time, n uint64) {
	if n == 0 {
		return
	}
	sec := now.Unix()
	p := &g.pending[sec%diskPendingSeconds]
	if p.sec != sec {
		*p = diskPending{sec: sec}
	}
	p.bytes += n
}

// status is the current state for /-/ready and DB.IngestError: nil when
// ingest is taken, else the ErrDiskFull error. It re-reads the free space
// when the cached figure is old, so that the box turns writable again even
// when nothing tries to commit.
func (g *diskGuard) status() error {
	return g.reserve(0, false)
}

func (g *diskGuard) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		g.rejected,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "appliance_storage_read_only",
			Help: "1 while free disk space is below storage.min_free_disk and ingest is refused (503), else 0.",
		}, func() float64 {
			_ = g.status()
			if g.readOnly.Load() {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "appliance_storage_free_disk_bytes",
			Help: "Free bytes on the data directory's filesystem (last reading).",
		}, func() float64 { return float64(g.lastFree.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "appliance_storage_min_free_disk_bytes",
			Help: "The free-disk watermark (storage.min_free_disk); 0 when off.",
		}, func() float64 { return float64(g.minFree) }),
	}
}

// takeEntered reports (once) that the guard turned read-only since the
// last call.
func (g *diskGuard) takeEntered() bool { return g.entered.Swap(false) }
