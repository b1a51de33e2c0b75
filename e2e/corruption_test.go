package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCorruptionIsAClearError damages one file of a stopped appliance's
// data directory at a time, as a disk, a crash or a careless hand would,
// and starts the real binary on it: it must exit 1 with a message naming
// the file and what to do, never a stack trace, and after that fix start
// and serve the data the fault did not touch.
func TestCorruptionIsAClearError(t *testing.T) {
	page := int64(os.Getpagesize())
	cases := []struct {
		name   string
		damage func(t *testing.T, data string) (file string)
		want   string
		fix    func(t *testing.T, file string) []string // extra flags for the next start
		lost   bool                                     // the fix loses the probe series
	}{
		{"state.db truncated", func(t *testing.T, data string) string {
			p := filepath.Join(data, "state.db")
			halve(t, p)
			return p
		}, "Move it aside", stateAside, false},
		{"state.db garbage page", func(t *testing.T, data string) string {
			p := filepath.Join(data, "state.db")
			fi, err := os.Stat(p)
			require.NoError(t, err)
			scribble(t, p, 2*page, int(fi.Size()-2*page))
			return p
		}, "Move it aside", stateAside, false},
		{"state.db zero bytes", func(t *testing.T, data string) string {
			p := filepath.Join(data, "state.db")
			require.NoError(t, os.Truncate(p, 0))
			return p
		}, "--storage.start-fresh", func(*testing.T, string) []string { return []string{"--storage.start-fresh"} }, false},
		{"garbage metaindex.bin", func(t *testing.T, data string) string {
			p := filepath.Join(rawPart(t, data, "small"), "metaindex.bin")
			scribble(t, p, 0, 64)
			return filepath.Dir(p)
		}, "Move it out of the data directory", partAside, true},
		{"missing metadata.json", func(t *testing.T, data string) string {
			p := filepath.Join(rawPart(t, data, "small"), "metadata.json")
			require.NoError(t, os.Remove(p))
			return filepath.Dir(p)
		}, "Move it out of the data directory", partAside, true},
		{"garbage parts.json", func(t *testing.T, data string) string {
			p := filepath.Join(filepath.Dir(rawPart(t, data, "small")), "parts.json")
			require.NoError(t, os.WriteFile(p, []byte("{\"Small\":[\"\x00garbage"), 0o644))
			return p
		}, "Remove it", func(t *testing.T, file string) []string { require.NoError(t, os.Remove(file)); return nil }, false},
		{"deleted part directory", func(t *testing.T, data string) string {
			p := rawPart(t, data, "small")
			require.NoError(t, os.RemoveAll(p))
			return p
		}, "listed but missing", func(t *testing.T, file string) []string { dropFromPartsJSON(t, file); return nil }, true},
		{"truncated index.bin", func(t *testing.T, data string) string {
			p := filepath.Join(rawPart(t, data, "small"), "index.bin")
			halve(t, p)
			return filepath.Dir(p)
		}, "truncated", partAside, true},
		{"truncated items.bin", func(t *testing.T, data string) string {
			p := filepath.Join(rawPart(t, data, "indexdb"), "items.bin")
			halve(t, p)
			return filepath.Dir(p)
		}, "truncated", partAside, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := writeConfig(t, dir, "scrape_configs: []\n")
			data := filepath.Join(dir, "data")
			p := start(t, cfg, data)
			now := time.Now()
			var b strings.Builder
			for i := range 20 {
				fmt.Fprintf(&b, "corruption_probe{series=\"%d\"} %d %d\n", i, i, now.UnixMilli())
			}
			code, body := p.post("/api/v1/import/prometheus", "text/plain", []byte(b.String()), nil)
			require.Equal(t, http.StatusNoContent, code, body)
			exit, _ := p.stop()
			require.Equal(t, 0, exit, p.Output())

			file := c.damage(t, data)
			addr := freeAddr(t)
			bad := launch(t, addr, "run", "--data", data, "--listen", addr, "--config", cfg)
			select {
			case <-bad.done:
			case <-time.After(60 * time.Second):
				t.Fatalf("appliance still running on a damaged %s:\n%s", file, bad.Output())
			}
			out := bad.Output()
			require.Equal(t, 1, bad.cmd.ProcessState.ExitCode(), out)
			require.Contains(t, out, file, "the message names the file")
			require.Contains(t, out, c.want, "the message says what to do")
			require.NotContains(t, out, "goroutine ", "no stack trace")
			require.NotContains(t, out, "panic", "no panic")
			t.Logf("exit 1: %s", strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]))

			extra := c.fix(t, file)
			p2 := start(t, cfg, data, extra...)
			got := p2.instant("count(corruption_probe)", now.Add(time.Second))
			if c.lost {
				// The part held the probe series; the store serves what
				// is left (nothing of them, here) and takes new data.
				require.LessOrEqual(t, len(got), 1)
			} else {
				require.Len(t, got, 1)
				require.Equal(t, 20.0, value(t, got[0]))
			}
			code, body = p2.post("/api/v1/import/prometheus", "text/plain", []byte(fmt.Sprintf("after_fix 1 %d\n", time.Now().UnixMilli())), nil)
			require.Equal(t, http.StatusNoContent, code, body)
			exit, _ = p2.stop()
			require.Equal(t, 0, exit, p2.Output())
			require.NotContains(t, p2.Output(), "goroutine ")
		})
	}
}

// rawPart returns a part directory of kind (small or indexdb) of the raw tier.
func rawPart(t *testing.T, data, kind string) string {
	t.Helper()
	parts, err := filepath.Glob(filepath.Join(data, "tsdb", "raw", "data", kind, "*", "*"))
	require.NoError(t, err)
	for _, p := range parts {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return p
		}
	}
	t.Fatalf("no %s part under %s", kind, data)
	return ""
}

func halve(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path, fi.Size()/2))
}

// scribble overwrites n bytes at off with a fixed pseudo-random pattern.
func scribble(t *testing.T, path string, off int64, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
}

// stateAside is the fix the message gives for a damaged state.db.
func stateAside(t *testing.T, file string) []string {
	require.NoError(t, os.Rename(file, file+".broken"))
	return []string{"--storage.start-fresh"}
}

// partAside is the fix the message gives for a damaged part: move it out
// and take its name off parts.json.
func partAside(t *testing.T, part string) []string {
	require.NoError(t, os.Rename(part, filepath.Join(t.TempDir(), filepath.Base(part))))
	dropFromPartsJSON(t, part)
	return nil
}

func dropFromPartsJSON(t *testing.T, part string) {
	name := filepath.Base(part)
	pj := filepath.Join(filepath.Dir(part), "parts.json")
	data, err := os.ReadFile(pj)
	require.NoError(t, err)
	require.Contains(t, string(data), name)
	for _, s := range []string{`"` + name + `",`, `,"` + name + `"`, `"` + name + `"`} {
		data = bytes.ReplaceAll(data, []byte(s), nil)
	}
	require.NoError(t, os.WriteFile(pj, data, 0o644))
}
