package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCheckBadConfigs runs `appliance check` on every config/testdata/*.bad.yml:
// each must exit 1 and print `file:line: message` naming that file. The
// exact message of each file is checked in package config's tests.
func TestCheckBadConfigs(t *testing.T) {
	files, err := filepath.Glob("../config/testdata/*.bad.yml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			var out bytes.Buffer
			cmd := exec.Command(binary, "check", "--config", f)
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "output: %s", out.String())
			require.Equal(t, 1, ee.ExitCode(), out.String())
			// The error names the file it is in: the config itself, or
			// a rule file it references.
			require.Regexp(t, regexp.MustCompile(`(?m)^\S+\.yml:\d+: \S`), out.String())
		})
	}

	var out bytes.Buffer
	cmd := exec.Command(binary, "check", "--config", "../config/testdata/good.yml")
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Run(), out.String())
	require.Contains(t, out.String(), "SUCCESS")
}

// quiet switches off auto-detection and local readings in a config that a
// test writes itself (writeConfig does it for the others).
const quiet = "autodetect: {enabled: false}\ncollectors: {enabled: false}\n"

func jobs(t *testing.T, p *proc) []string {
	t.Helper()
	code, r := p.get("/api/v1/targets", nil)
	require.Equal(t, http.StatusOK, code)
	var data struct {
		ActiveTargets []struct {
			ScrapePool string `json:"scrapePool"`
		} `json:"activeTargets"`
	}
	require.NoError(t, json.Unmarshal(r.Data, &data))
	var out []string
	for _, a := range data.ActiveTargets {
		out = append(out, a.ScrapePool)
	}
	return out
}

// TestReloadKeepsOldConfigOnError: a bad file on /-/reload is refused with
// the reason and the old jobs keep running; a good file applies.
func TestReloadKeepsOldConfigOnError(t *testing.T) {
	srv := serveFixture(t, fixture{"ok", "text/plain; version=0.0.4", []byte("ok 1\n")})
	host := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	good := fmt.Sprintf("global: {scrape_interval: 1s}\nscrape_configs:\n  - job_name: first\n    static_configs: [{targets: [%q]}]\n", host)
	cfgPath := writeConfig(t, dir, good)
	p := start(t, cfgPath, filepath.Join(dir, "data"))
	eventually(t, 20*time.Second, "job first active", func() bool { return len(jobs(t, p)) == 1 })

	require.NoError(t, os.WriteFile(cfgPath, []byte("scrape_configs:\n  - job_name: second\n    scrape_interval: 1s\n    scrape_timeout: 5s\n    static_configs: [{targets: [\""+host+"\"]}]\n"+quiet), 0o644))
	code, body := p.post("/-/reload", "text/plain", nil, nil)
	require.Equal(t, http.StatusInternalServerError, code)
	require.Contains(t, body, "scrape timeout greater than scrape interval")
	require.Equal(t, []string{"first"}, jobs(t, p))
	resp, err := http.Get(p.url("/metrics"))
	require.NoError(t, err)
	var m bytes.Buffer
	_, _ = m.ReadFrom(resp.Body)
	resp.Body.Close()
	require.Contains(t, m.String(), "appliance_config_last_reload_successful 0")

	require.NoError(t, os.WriteFile(cfgPath, []byte(strings.Replace(good, "first", "second", 1)+quiet), 0o644))
	code, body = p.post("/-/reload", "text/plain", nil, nil)
	require.Equal(t, http.StatusOK, code, body)
	eventually(t, 20*time.Second, "job second replaces first", func() bool {
		j := jobs(t, p)
		return len(j) == 1 && j[0] == "second"
	})
}

// TestSIGTERMFlushesAndExits: SIGTERM exits 0 within 5 s and what was
// written before is there after a restart.
func TestSIGTERMFlushesAndExits(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "scrape_configs: []\n")
	data := filepath.Join(dir, "data")
	p := start(t, cfg, data)
	now := time.Now().UnixMilli()
	code, body := p.post("/api/v1/import/prometheus", "text/plain", []byte(fmt.Sprintf("sigterm_probe 42 %d\n", now)), nil)
	require.Equal(t, http.StatusNoContent, code, body)
	exit, took := p.stop()
	require.Equal(t, 0, exit, p.Output())
	require.Less(t, took, 5*time.Second, "shutdown took %s", took)

	p2 := start(t, cfg, data)
	v := p2.instant("sigterm_probe", time.UnixMilli(now))
	require.Len(t, v, 1)
	require.Equal(t, 42.0, value(t, v[0]))
}

// TestKill9LosesOnlyTheLastSeconds pushes samples for many series every
// 200 ms, kills the process with SIGKILL, restarts it, and checks that every
// series is there and that no more than the last few seconds are missing.
func TestKill9LosesOnlyTheLastSeconds(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "scrape_configs: []\n")
	data := filepath.Join(dir, "data")
	p := start(t, cfg, data)

	const series = 200
	begin := time.Now()
	var lastAcked time.Time
	for time.Since(begin) < 12*time.Second {
		ts := time.Now()
		var b strings.Builder
		for i := 0; i < series; i++ {
			fmt.Fprintf(&b, "kill_probe{series=\"%d\"} %d %d\n", i, ts.UnixMilli(), ts.UnixMilli())
		}
		code, body := p.post("/api/v1/import/prometheus", "text/plain", []byte(b.String()), nil)
		require.Equal(t, http.StatusNoContent, code, body)
		lastAcked = ts
		time.Sleep(200 * time.Millisecond)
	}
	p.kill9()

	p2 := start(t, cfg, data)
	at := lastAcked.Add(time.Second)
	got := p2.instant(`timestamp(last_over_time(kill_probe[1m]))`, at)
	require.Len(t, got, series, "every series survives kill -9")
	for _, s := range got {
		last := time.UnixMilli(int64(value(t, s) * 1000))
		lost := lastAcked.Sub(last)
		require.LessOrEqual(t, lost, 8*time.Second, "series %s lost %s of acknowledged samples", s.Metric["series"], lost)
	}
	first := p2.instant(`count_over_time(kill_probe{series="0"}[1m])`, begin.Add(6*time.Second))
	require.Len(t, first, 1)
	require.Greater(t, value(t, first[0]), 10.0, "early samples are there")
	t.Logf("kill -9: last acknowledged sample %s before the kill; restored up to %s before it",
		time.Since(lastAcked).Round(time.Millisecond), lastAcked.Sub(time.UnixMilli(int64(value(t, got[0])*1000))))
}
