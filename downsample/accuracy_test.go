package downsample

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aiserve/appliance/query"
	"github.com/aiserve/appliance/storage"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"
)

// fixture is a parsed accuracy test file (testdata/accuracy.test).
type fixture struct {
	interval, length time.Duration
	gens             []generator
	evals            []evalCmd
}

type evalCmd struct {
	line     int
	tier     storage.Tier
	from, to time.Duration
	step     time.Duration
	tol      float64 // relative; 0 = exact
	exact    bool
	queries  []string
	expect   map[string]float64 // query -> max value expected
}

type generator struct {
	kind string
	lset labels.Labels
	args map[string]string
}

func parseDur(t testing.TB, s string) time.Duration {
	t.Helper()
	d, err := model.ParseDuration(s)
	require.NoError(t, err, s)
	return time.Duration(d)
}

func parseFloat(t testing.TB, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err, s)
	return f
}

func loadFixture(t testing.TB, path string) *fixture {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	fx := &fixture{}
	var cur *evalCmd
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			cur = nil
			continue
		}
		fields := strings.Fields(line)
		switch {
		case fields[0] == "load":
			fx.interval, fx.length = parseDur(t, fields[1]), parseDur(t, fields[2])
		case fields[0] == "eval":
			// eval <tier> range <from> <to> step <step> (within <pct>% | exact)
			require.GreaterOrEqual(t, len(fields), 8, "line %d", n)
			tier, err := storage.ParseTier(fields[1])
			require.NoError(t, err)
			e := evalCmd{line: n, tier: tier, from: parseDur(t, fields[3]), to: parseDur(t, fields[4]), step: parseDur(t, fields[6]), expect: map[string]float64{}}
			if fields[7] == "exact" {
				e.exact = true
			} else {
				require.Equal(t, "within", fields[7], "line %d", n)
				e.tol = parseFloat(t, strings.TrimSuffix(fields[8], "%")) / 100
			}
			fx.evals = append(fx.evals, e)
			cur = &fx.evals[len(fx.evals)-1]
		case fields[0] == "expect":
			require.NotNil(t, cur, "line %d", n)
			require.Equal(t, "max", fields[1])
			cur.expect[cur.queries[len(cur.queries)-1]] = parseFloat(t, fields[2])
		case cur != nil:
			cur.queries = append(cur.queries, line)
		default:
			// a generator line: <kind> <series> <args...>
			ls, err := parser.NewParser(parser.Options{}).ParseMetric(fields[1])
			require.NoError(t, err, "line %d", n)
			g := generator{kind: fields[0], lset: ls, args: map[string]string{}}
			for i := 2; i+1 < len(fields); i += 2 {
				g.args[fields[i]] = fields[i+1]
				if fields[i] == "wave" || fields[i] == "spike" || fields[i] == "dip" {
					// two or three values
					vals := []string{}
					j := i + 1
					for ; j < len(fields) && !isKeyword(fields[j]); j++ {
						vals = append(vals, fields[j])
					}
					g.args[fields[i]] = strings.Join(vals, " ")
					i = j - 2
				}
			}
			fx.gens = append(fx.gens, g)
		}
	}
	require.NoError(t, sc.Err())
	return fx
}

func isKeyword(s string) bool {
	switch s {
	case "wave", "noise", "spike", "dip", "rate", "reset", "median", "buckets":
		return true
	}
	return false
}

// emit generates the samples of g at t0 + k*interval and calls add for
// each.
func (g generator) emit(t testing.TB, t0 time.Time, interval, length time.Duration, seed uint64, add func(ls labels.Labels, ts int64, v float64)) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	steps := int(length / interval)
	sec := interval.Seconds()
	at := func(arg string) (int, float64) {
		p := strings.Fields(g.args[arg])
		if len(p) != 2 {
			return -1, 0
		}
		return int(parseDur(t, p[0]) / interval), parseFloat(t, p[1])
	}
	switch g.kind {
	case "gauge":
		w := strings.Fields(g.args["wave"])
		base, amp, period := parseFloat(t, w[0]), parseFloat(t, w[1]), parseDur(t, w[2])
		sd := parseFloat(t, g.args["noise"])
		spikeAt, spike := at("spike")
		dipAt, dip := at("dip")
		for k := 0; k <= steps; k++ {
			x := float64(k) * sec
			v := base + amp*math.Sin(2*math.Pi*x/period.Seconds()) + sd*rng.NormFloat64()
			v = math.Round(v*100) / 100
			switch k {
			case spikeAt:
				v = spike
			case dipAt:
				v = dip
			}
			add(g.lset, t0.Add(time.Duration(k)*interval).UnixMilli(), v)
		}
	case "counter":
		r, sd := parseFloat(t, g.args["rate"]), parseFloat(t, g.args["noise"])
		every := int(parseDur(t, g.args["reset"]) / interval)
		var c float64
		for k := 0; k <= steps; k++ {
			if k > 0 && k%every == 0 {
				c = 0
			} else {
				c += math.Max(0, math.Round(r*sec*(1+0.3*math.Sin(float64(k)/500))+sd*rng.NormFloat64()))
			}
			add(g.lset, t0.Add(time.Duration(k)*interval).UnixMilli(), c)
		}
	case "histogram":
		r := parseFloat(t, g.args["rate"])
		median := parseFloat(t, g.args["median"])
		every := int(parseDur(t, g.args["reset"]) / interval)
		var les []float64
		for _, s := range strings.Split(g.args["buckets"], ",") {
			les = append(les, parseFloat(t, s))
		}
		name := g.lset.Get(labels.MetricName)
		with := func(suffix string, extra ...string) labels.Labels {
			b := labels.NewBuilder(g.lset)
			b.Set(labels.MetricName, name+suffix)
			for i := 0; i+1 < len(extra); i += 2 {
				b.Set(extra[i], extra[i+1])
			}
			return b.Labels()
		}
		bucketLs := make([]labels.Labels, len(les)+1)
		for i, le := range les {
			bucketLs[i] = with("_bucket", "le", strconv.FormatFloat(le, 'f', -1, 64))
		}
		bucketLs[len(les)] = with("_bucket", "le", "+Inf")
		sumLs, countLs := with("_sum"), with("_count")
		counts := make([]float64, len(les)+1)
		var sum, count float64
		for k := 0; k <= steps; k++ {
			if k > 0 && k%every == 0 {
				clear(counts)
				sum, count = 0, 0
			} else {
				n := math.Max(0, math.Round(r*sec+math.Sqrt(r*sec)*rng.NormFloat64()))
				day := float64(k) * sec / 86400
				mu := math.Log(median * (1 + 0.5*math.Sin(2*math.Pi*day)))
				const sigma = 0.6
				for i, le := range les {
					cdf := 0.5 * math.Erfc(-(math.Log(le)-mu)/(sigma*math.Sqrt2))
					counts[i] += math.Round(n * cdf)
				}
				counts[len(les)] += n
				count += n
				sum += n * math.Exp(mu+sigma*sigma/2)
			}
			ts := t0.Add(time.Duration(k) * interval).UnixMilli()
			for i := range counts {
				add(bucketLs[i], ts, counts[i])
			}
			add(sumLs, ts, sum)
			add(countLs, ts, count)
		}
	default:
		t.Fatalf("unknown generator kind %q", g.kind)
	}
}

func TestAccuracy(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" { // CI runs them, -short or not
		t.Skip("loads 30 days of data")
	}
	fx := loadFixture(t, "testdata/accuracy.test")

	// The data ends an hour before now, so that everything is rolled up;
	// raw keeps it all, to be the reference.
	now := time.Now()
	t0 := now.Add(-fx.length - time.Hour).Truncate(time.Hour)
	opts := storage.DefaultOptions()
	opts.Path = t.TempDir()
	opts.RetentionRaw = 40 * 24 * time.Hour
	opts.Retention1m = 60 * 24 * time.Hour
	opts.Retention5m = 90 * 24 * time.Hour
	opts.MemoryBudget = 256 << 20
	db, err := storage.Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })

	began := time.Now()
	app := db.AppenderV2(context.Background())
	n := 0
	for i, g := range fx.gens {
		g.emit(t, t0, fx.interval, fx.length, uint64(i+1), func(ls labels.Labels, ts int64, v float64) {
			_, err := app.Append(0, ls, 0, ts, v, nil, nil, promstorage.AOptions{})
			require.NoError(t, err)
			if n++; n%100_000 == 0 {
				require.NoError(t, app.Commit())
				app = db.AppenderV2(context.Background())
			}
		})
	}
	require.NoError(t, app.Commit())
	db.Flush()
	t.Logf("loaded %d samples in %s", n, time.Since(began).Round(time.Millisecond))

	began = time.Now()
	ds, err := New(db, Options{Now: func() time.Time { return now }, Span1m: time.Hour, Span5m: 6 * time.Hour})
	require.NoError(t, err)
	defer ds.Close()
	require.NoError(t, ds.Step(context.Background()))
	t.Logf("rolled up in %s; watermarks 1m %s, 5m %s", time.Since(began).Round(time.Millisecond),
		ds.Watermark(storage.Tier1m).UTC(), ds.Watermark(storage.Tier5m).UTC())
	require.False(t, ds.Watermark(storage.Tier5m).Before(t0.Add(fx.length)))
	rows := tierRows(t, db)
	t.Logf("1m tier %d rows (%.2f per raw sample), 5m tier %d rows", rows[storage.Tier1m], float64(rows[storage.Tier1m])/float64(n), rows[storage.Tier5m])

	checkEvals(t, fx, t0, db, db, 0)
}

// checkEvals runs the fixture's evals on dut, each with
// max_source_resolution=<tier> (served by that tier alone), and compares
// them point by point with the same query on ref's raw tier. unaligned,
// when above the fixture's tolerance, replaces it for evals whose start or
// step is not a multiple of the tier's resolution.
func checkEvals(t *testing.T, fx *fixture, t0 time.Time, dut, ref *storage.DB, unaligned float64) {
	t.Helper()
	eng := query.New(query.Options{}, nil, nil)
	run := func(db *storage.DB, tier storage.Tier, q string, e evalCmd) (promql.Matrix, []storage.Tier) {
		ctx, rec := storage.WithTierRecorder(storage.WithMaxSourceResolution(context.Background(), tier))
		qry, err := eng.NewRangeQuery(ctx, db, nil, q, t0.Add(e.from), t0.Add(e.to), e.step)
		require.NoError(t, err, q)
		defer qry.Close()
		res := qry.Exec(ctx)
		require.NoError(t, res.Err, q)
		m, err := res.Matrix()
		require.NoError(t, err, q)
		// Close hands the points back to the engine's pools: copy them.
		out := make(promql.Matrix, len(m))
		for i, s := range m {
			out[i] = promql.Series{Metric: s.Metric, Floats: slices.Clone(s.Floats)}
		}
		return out, rec.Used()
	}
	for _, e := range fx.evals {
		for _, q := range e.queries {
			t.Run(fmt.Sprintf("line%d/%s/%s", e.line, e.tier, q), func(t *testing.T) {
				q, refQ, ok := strings.Cut(q, " ;; ")
				if !ok {
					refQ = q
				}
				got, used := run(dut, e.tier, q, e)
				want, wantUsed := run(ref, storage.TierRaw, refQ, e)
				require.Equal(t, []storage.Tier{e.tier}, used, "served by")
				require.Equal(t, []storage.Tier{storage.TierRaw}, wantUsed)
				require.NotEmpty(t, want)
				require.Len(t, got, len(want))
				tol := e.tol
				if res := e.tier.Resolution(); (e.from%res != 0 || e.step%res != 0) && unaligned > tol {
					tol = unaligned
				}
				if e.exact {
					tol = 1e-9
				}
				var worst float64
				points, bad := 0, 0
				defer func() { require.Zero(t, bad, "bad points") }()
				for i := range want {
					require.Equal(t, want[i].Metric, got[i].Metric)
					require.Len(t, got[i].Floats, len(want[i].Floats), "%s", want[i].Metric)
					for j, w := range want[i].Floats {
						g := got[i].Floats[j]
						require.Equal(t, w.T, g.T)
						rel := math.Abs(g.F-w.F) / math.Max(math.Abs(w.F), 1e-12)
						if g.F == w.F {
							rel = 0
						}
						worst = max(worst, rel)
						points++
						if rel > tol {
							bad++
							if bad < 5 {
								t.Logf("%s at %s: %g vs %g", want[i].Metric, time.UnixMilli(w.T).Sub(t0), g.F, w.F)
							}
							continue
						}
						require.LessOrEqual(t, rel, tol, "%s at %s: %s tier %g, raw %g",
							want[i].Metric, time.UnixMilli(w.T).Sub(t0), e.tier, g.F, w.F)
					}
				}
				if v, ok := e.expect[q]; ok {
					for _, s := range got {
						top := math.Inf(-1)
						for _, p := range s.Floats {
							top = max(top, p.F)
						}
						require.Equal(t, v, top, "%s", s.Metric)
					}
				}
				t.Logf("%d points, worst relative error %.2e", points, worst)
			})
		}
	}
}
