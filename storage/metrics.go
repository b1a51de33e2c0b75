package storage

import (
	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
	"github.com/prometheus/client_golang/prometheus"
)

// dbMetrics are the appliance_storage_* self-metrics of one DB.
type dbMetrics struct {
	db  *DB
	reg prometheus.Registerer

	samplesAppended prometheus.Counter
	appendErrorsVec *prometheus.CounterVec
	appendErrorsBy  map[string]prometheus.Counter
	vm              *vmCollector

	collectors []prometheus.Collector
}

func newDBMetrics(db *DB, reg prometheus.Registerer) *dbMetrics {
	m := &dbMetrics{
		db:  db,
		reg: reg,
		samplesAppended: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "appliance_storage_samples_appended_total",
			Help: "Samples written to the raw tier.",
		}),
		appendErrorsVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "appliance_storage_append_errors_total",
			Help: "Samples not stored, by reason (out_of_bounds, nan, native_histogram, invalid_labels, closed, write, disk_full, wal).",
		}, []string{"reason"}),
		vm: &vmCollector{db: db},
	}
	// Resolve the children once: appendErrors runs on the append path.
	m.appendErrorsBy = make(map[string]prometheus.Counter)
	for _, r := range []string{reasonOutOfBounds, reasonNaN, reasonNativeHistogram, reasonInvalidLabels, reasonClosed, reasonWrite, reasonDiskFull, reasonWAL} {
		m.appendErrorsBy[r] = m.appendErrorsVec.WithLabelValues(r)
	}
	activeSeries := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "appliance_storage_active_series",
		Help: "Series with samples in the current or previous hour.",
	}, func() float64 { return float64(db.ActiveSeries()) })
	m.collectors = []prometheus.Collector{m.samplesAppended, m.appendErrorsVec, activeSeries, headCollector{db.head}, m.vm}
	if db.guard != nil {
		m.collectors = append(m.collectors, db.guard.collectors()...)
	}
	return m
}

func (m *dbMetrics) appendErrors(reason string, n int) {
	m.appendErrorsBy[reason].Add(float64(n))
}

func (m *dbMetrics) register() error {
	if m.reg == nil {
		return nil
	}
	for i, c := range m.collectors {
		if err := m.reg.Register(c); err != nil {
			for _, done := range m.collectors[:i] {
				m.reg.Unregister(done)
			}
			return err
		}
	}
	return nil
}

// unregister lets a DB be reopened with the same registry.
func (m *dbMetrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.collectors {
		m.reg.Unregister(c)
	}
}

// headCollector exports the head's size: one walk of the head per scrape
// gives both figures.
type headCollector struct{ h *head }

var (
	descHeadSeries = prometheus.NewDesc("appliance_storage_head_series",
		"Series the in-memory head holds: those that got samples in the last two flush generations.", nil, nil)
	descHeadSamples = prometheus.NewDesc("appliance_storage_head_samples",
		"Samples the in-memory head holds.", nil, nil)
)

func (c headCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descHeadSeries
	ch <- descHeadSamples
}

func (c headCollector) Collect(ch chan<- prometheus.Metric) {
	series, samples := c.h.size()
	ch <- prometheus.MustNewConstMetric(descHeadSeries, prometheus.GaugeValue, float64(series))
	ch <- prometheus.MustNewConstMetric(descHeadSamples, prometheus.GaugeValue, float64(samples))
}

// vmCollector exports a few of VictoriaMetrics' own figures, read once per
// scrape with UpdateMetrics.
type vmCollector struct {
	db *DB
}

var (
	descRowsPending = prometheus.NewDesc("appliance_storage_rows_pending",
		"Rows buffered in memory, not yet searchable (VM flushes them within a second).", []string{"tier"}, nil)
	descRows = prometheus.NewDesc("appliance_storage_rows",
		"Rows stored, including not yet merged duplicates.", []string{"tier"}, nil)
	descParts = prometheus.NewDesc("appliance_storage_parts",
		"Data parts by kind (inmemory, small, big); a growing count means merges lag behind.", []string{"tier", "kind"}, nil)
	descDiskBytes = prometheus.NewDesc("appliance_storage_disk_bytes",
		"Bytes on disk for data and index.", []string{"tier"}, nil)
	descDropped = prometheus.NewDesc("appliance_storage_vm_rows_dropped_total",
		"Rows VictoriaMetrics itself refused (timestamps out of range, bad names), which the appender should have caught.", []string{"tier"}, nil)
)

func (c *vmCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descRowsPending
	ch <- descRows
	ch <- descParts
	ch <- descDiskBytes
	ch <- descDropped
}

func (c *vmCollector) Collect(ch chan<- prometheus.Metric) {
	db := c.db
	if err := db.readLock(); err != nil {
		return
	}
	var ms [NumTiers]vmstorage.Metrics
	for i, ts := range db.tiers {
		ts.vm.UpdateMetrics(&ms[i])
	}
	db.readUnlock()
	for i := range ms {
		c.collectTier(ch, Tier(i).String(), &ms[i])
	}
}

func (c *vmCollector) collectTier(ch chan<- prometheus.Metric, tier string, m *vmstorage.Metrics) {
	tm := &m.TableMetrics
	gauge := func(d *prometheus.Desc, v uint64, lvs ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), lvs...)
	}
	gauge(descRowsPending, tm.PendingRows, tier)
	gauge(descRows, tm.TotalRowsCount(), tier)
	gauge(descParts, tm.InmemoryPartsCount, tier, "inmemory")
	gauge(descParts, tm.SmallPartsCount, tier, "small")
	gauge(descParts, tm.BigPartsCount, tier, "big")
	gauge(descDiskBytes, tm.SmallSizeBytes+tm.BigSizeBytes+tm.IndexDBMetrics.FileSizeBytes, tier)
	ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue,
		float64(m.TooSmallTimestampRows+m.TooBigTimestampRows+m.InvalidRawMetricNames), tier)
}
