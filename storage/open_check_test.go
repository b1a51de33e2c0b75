package storage

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"
)

// damagedStore writes some series and some state, closes the store and
// returns its path.
func damagedStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	opts := DefaultOptions()
	opts.Path = dir
	db, err := Open(opts)
	require.NoError(t, err)
	data := map[string][]sample{}
	for i := range 50 {
		data[fmt.Sprintf(`up{instance="h%d"}`, i)] = samplesOf(100, baseTime, 15000, func(i int) float64 { return float64(i % 2) })
	}
	appendSamples(t, db, data)
	require.NoError(t, db.State().Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("test.silences"))
		if err != nil {
			return err
		}
		for i := range 2000 {
			if err := b.Put(fmt.Appendf(nil, "silence-%05d", i), bytes.Repeat([]byte("x"), 100)); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, db.Close())
	return dir
}

// onePart returns a part directory of kind (small or indexdb) of the raw tier.
func onePart(t *testing.T, dir, kind string) string {
	t.Helper()
	parts, err := filepath.Glob(filepath.Join(dir, "tsdb", "raw", "data", kind, "*", "*"))
	require.NoError(t, err)
	for _, p := range parts {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return p
		}
	}
	t.Fatalf("no %s part under %s", kind, dir)
	return ""
}

func truncateHalf(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path, fi.Size()/2))
}

func garbage(t *testing.T, path string, off int64, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, n)
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
}

// TestOpenDamaged: every damaged file is an error from Open naming the
// file and the fix, never a panic; the fix, applied, opens the store.
func TestOpenDamaged(t *testing.T) {
	page := int64(os.Getpagesize())
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string) (file string)
		want   string
		fix    func(t *testing.T, dir, file string, opts *Options)
	}{
		{"state.db truncated", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "state.db")
			truncateHalf(t, p)
			return p
		}, "Move it aside", moveStateAside},
		{"state.db garbage pages", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "state.db")
			fi, err := os.Stat(p)
			require.NoError(t, err)
			garbage(t, p, 2*page, int(fi.Size()-2*page))
			return p
		}, "Move it aside", moveStateAside},
		{"state.db one garbage page", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "state.db")
			fi, err := os.Stat(p)
			require.NoError(t, err)
			garbage(t, p, (fi.Size()/page/2)*page, int(page))
			return p
		}, "Move it aside", moveStateAside},
		{"state.db zero bytes", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "state.db")
			require.NoError(t, os.Truncate(p, 0))
			return p
		}, "--storage.start-fresh", startFresh},
		{"state.db missing", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "state.db")
			require.NoError(t, os.Remove(p))
			return p
		}, "--storage.start-fresh", startFresh},
		{"garbage metaindex.bin", func(t *testing.T, dir string) string {
			p := filepath.Join(onePart(t, dir, "small"), "metaindex.bin")
			garbage(t, p, 0, 64)
			return filepath.Dir(p)
		}, "Move it out of the data directory", movePartAside},
		{"missing metadata.json", func(t *testing.T, dir string) string {
			p := filepath.Join(onePart(t, dir, "small"), "metadata.json")
			require.NoError(t, os.Remove(p))
			return filepath.Dir(p)
		}, "Move it out of the data directory", movePartAside},
		{"garbage parts.json", func(t *testing.T, dir string) string {
			p := filepath.Join(filepath.Dir(onePart(t, dir, "small")), "parts.json")
			require.NoError(t, os.WriteFile(p, []byte("{\"Small\":[\"\x00\x01garbage"), 0o644))
			return p
		}, "Remove it", func(t *testing.T, dir, file string, _ *Options) { require.NoError(t, os.Remove(file)) }},
		{"deleted part directory", func(t *testing.T, dir string) string {
			p := onePart(t, dir, "small")
			require.NoError(t, os.RemoveAll(p))
			return p
		}, "listed but missing", func(t *testing.T, dir, file string, _ *Options) { unlist(t, file) }},
		{"truncated index.bin", func(t *testing.T, dir string) string {
			p := filepath.Join(onePart(t, dir, "small"), "index.bin")
			truncateHalf(t, p)
			return filepath.Dir(p)
		}, "truncated", movePartAside},
		{"truncated items.bin", func(t *testing.T, dir string) string {
			p := filepath.Join(onePart(t, dir, "indexdb"), "items.bin")
			truncateHalf(t, p)
			return filepath.Dir(p)
		}, "truncated", movePartAside},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := damagedStore(t)
			file := c.damage(t, dir)
			opts := DefaultOptions()
			opts.Path = dir
			var err error
			require.NotPanics(t, func() {
				var db *DB
				db, err = Open(opts)
				if err == nil {
					_ = db.Close()
				}
			})
			require.Error(t, err)
			require.ErrorIs(t, err, ErrDamaged)
			require.Contains(t, err.Error(), file)
			require.Contains(t, err.Error(), c.want)

			c.fix(t, dir, file, &opts)
			db, err := Open(opts)
			require.NoError(t, err, "after the fix the message names")
			require.NoError(t, db.Close())
		})
	}
}

func moveStateAside(t *testing.T, dir, file string, opts *Options) {
	require.NoError(t, os.Rename(file, file+".broken"))
	opts.StartFresh = true
}

func startFresh(_ *testing.T, _, _ string, opts *Options) { opts.StartFresh = true }

// movePartAside moves a part out of the store and off its parts.json.
func movePartAside(t *testing.T, dir, part string, _ *Options) {
	require.NoError(t, os.Rename(part, filepath.Join(t.TempDir(), filepath.Base(part))))
	unlist(t, part)
}

// unlist removes a part's name from its partition's parts.json.
func unlist(t *testing.T, part string) {
	name := filepath.Base(part)
	pj := filepath.Join(filepath.Dir(part), "parts.json")
	if _, err := os.Stat(pj); err != nil {
		// A big part is listed in small/<month>/parts.json.
		pj = filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(part))), "small", filepath.Base(filepath.Dir(part)), "parts.json")
	}
	data, err := os.ReadFile(pj)
	require.NoError(t, err)
	require.Contains(t, string(data), name)
	data = bytes.ReplaceAll(data, []byte(`"`+name+`",`), nil)
	data = bytes.ReplaceAll(data, []byte(`,"`+name+`"`), nil)
	data = bytes.ReplaceAll(data, []byte(`"`+name+`"`), nil)
	require.NoError(t, os.WriteFile(pj, data, 0o644))
}
