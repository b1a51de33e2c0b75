package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// compatSink is a webhook receiver (or an external Alertmanager's
// /api/v2/alerts) that keeps what it got and the credentials it came with.
type compatSink struct {
	srv  *httptest.Server
	mu   sync.Mutex
	auth []string
	got  []compatPayload
	am   []string // alertnames posted to an Alertmanager API
}

type compatPayload struct {
	GroupKey string `json:"groupKey"`
	Receiver string `json:"receiver"`
	Alerts   []struct {
		Status string            `json:"status"`
		Labels map[string]string `json:"labels"`
		EndsAt string            `json:"endsAt"`
	} `json:"alerts"`
}

func newCompatSink(t *testing.T, path string) *compatSink {
	s := &compatSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		if r.URL.Path != path {
			t.Errorf("request to %s, want %s", r.URL.Path, path)
			http.NotFound(w, r)
			return
		}
		s.auth = append(s.auth, r.Header.Get("Authorization"))
		if path == "/am/api/v2/alerts" {
			var as []struct {
				Labels map[string]string `json:"labels"`
			}
			if err := json.Unmarshal(b, &as); err != nil {
				t.Errorf("alertmanager body: %v: %s", err, b)
			}
			for _, a := range as {
				s.am = append(s.am, a.Labels["alertname"])
			}
			return
		}
		var p compatPayload
		if err := json.Unmarshal(b, &p); err != nil {
			t.Errorf("webhook body: %v: %s", err, b)
		}
		s.got = append(s.got, p)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// firing lists "alertname@instance" of the firing alerts received, sorted,
// without repeats.
func (s *compatSink) firing() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for _, p := range s.got {
		for _, a := range p.Alerts {
			if a.Status == "firing" {
				seen[a.Labels["alertname"]+"@"+a.Labels["instance"]] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (s *compatSink) snapshot() ([]string, []compatPayload, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.auth), slices.Clone(s.got), slices.Clone(s.am)
}

// metricsServer serves fixed exposition text.
func metricsServer(t *testing.T, body func(r *http.Request) string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = io.WriteString(w, body(r))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestCompatPublicRuleSets: rule files shaped like the widely used public
// sets (host rules over node_exporter's names, Prometheus self-monitoring,
// blackbox probes; severities critical, warning and info, no P0/P1/P2
// anywhere), a prometheus.yml and an alertmanager.yml as a lab has them
// (the latter pasted under alerting: as is) run against fake
// node_exporter, blackbox_exporter and Prometheus targets; every alert
// that should fire reaches the receiver its route names, with the
// credentials of its http_config, the inhibited and the quiet ones reach
// none, and the rules' alerts are also sent to the Alertmanager of
// alerting.alertmanagers.
func TestCompatPublicRuleSets(t *testing.T) {
	node := metricsServer(t, func(*http.Request) string {
		return `# HELP node_memory_MemAvailable_bytes Memory information field MemAvailable_bytes.
# TYPE node_memory_MemAvailable_bytes gauge
node_memory_MemAvailable_bytes 5e+08
# TYPE node_memory_MemTotal_bytes gauge
node_memory_MemTotal_bytes 8e+09
# TYPE node_memory_SwapFree_bytes gauge
node_memory_SwapFree_bytes 1.8e+09
# TYPE node_memory_SwapTotal_bytes gauge
node_memory_SwapTotal_bytes 2e+09
# TYPE node_filesystem_avail_bytes gauge
node_filesystem_avail_bytes{device="/dev/nvme0n1p2",fstype="ext4",mountpoint="/"} 5e+09
node_filesystem_avail_bytes{device="tmpfs",fstype="tmpfs",mountpoint="/run"} 1e+06
# TYPE node_filesystem_size_bytes gauge
node_filesystem_size_bytes{device="/dev/nvme0n1p2",fstype="ext4",mountpoint="/"} 1e+11
node_filesystem_size_bytes{device="tmpfs",fstype="tmpfs",mountpoint="/run"} 1e+09
# TYPE node_filesystem_readonly gauge
node_filesystem_readonly{device="/dev/nvme0n1p2",fstype="ext4",mountpoint="/"} 0
node_filesystem_readonly{device="tmpfs",fstype="tmpfs",mountpoint="/run"} 0
# TYPE node_load1 gauge
node_load1 9
# TYPE node_cpu_seconds_total counter
node_cpu_seconds_total{cpu="0",mode="idle"} 1000
node_cpu_seconds_total{cpu="1",mode="idle"} 1000
node_cpu_seconds_total{cpu="0",mode="user"} 300
node_cpu_seconds_total{cpu="1",mode="user"} 300
`
	})
	blackbox := metricsServer(t, func(r *http.Request) string {
		if r.URL.Path != "/probe" || r.URL.Query().Get("module") != "http_2xx" {
			return "# bad probe request\n"
		}
		ok, code := 1, 200
		if r.URL.Query().Get("target") == "http://broken.example.org" {
			ok, code = 0, 503
		}
		return fmt.Sprintf(`# TYPE probe_success gauge
probe_success %d
# TYPE probe_http_status_code gauge
probe_http_status_code %d
# TYPE probe_duration_seconds gauge
probe_duration_seconds 0.05
`, ok, code)
	})
	prom := metricsServer(t, func(*http.Request) string {
		return `# TYPE prometheus_config_last_reload_successful gauge
prometheus_config_last_reload_successful 0
# TYPE prometheus_rule_evaluation_failures_total counter
prometheus_rule_evaluation_failures_total{rule_group="/etc/prometheus/rules.yml;node"} 0
`
	})
	// A node whose exporter is gone: nothing listens there.
	gone := freeAddr(t)

	team, oncall, tickets := newCompatSink(t, "/team"), newCompatSink(t, "/oncall"), newCompatSink(t, "/tickets")
	extAM := newCompatSink(t, "/am/api/v2/alerts")

	// The files as written, with the test's addresses in place of the
	// upper-case names; the alertmanager.yml pasted under alerting:.
	dir := t.TempDir()
	copyTree(t, "testdata/compat", dir)
	host := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }
	promYML := readFile(t, filepath.Join(dir, "prometheus.yml"))
	amYML := readFile(t, filepath.Join(dir, "alertmanager.yml"))
	// In this order: NODE_EXPORTER_GONE before NODE_EXPORTER, which is a
	// prefix of it (in a map's random order the gone node became the live
	// node's address with "_GONE" after it, half of the time).
	for _, r := range [][2]string{
		{"EXTERNAL_ALERTMANAGER", host(extAM.srv)}, {"PROMETHEUS_TARGET", host(prom)}, {"NODE_EXPORTER_GONE", gone},
		{"NODE_EXPORTER", host(node)}, {"BLACKBOX_EXPORTER", host(blackbox)},
		{"TEAM_WEBHOOK", team.srv.URL + "/team"}, {"ONCALL_WEBHOOK", oncall.srv.URL + "/oncall"}, {"TICKETS_WEBHOOK", tickets.srv.URL + "/tickets"},
	} {
		promYML, amYML = strings.ReplaceAll(promYML, r[0], r[1]), strings.ReplaceAll(amYML, r[0], r[1])
	}
	var pasted strings.Builder
	for line := range strings.Lines(amYML) {
		pasted.WriteString("  " + line)
	}
	require.Contains(t, promYML, "\nalerting:\n")
	cfg := strings.Replace(promYML, "\nalerting:\n", "\nalerting:\n"+pasted.String()+"\n", 1)
	for _, f := range []string{cfg, readFile(t, filepath.Join(dir, "rules", "node.rules.yml")), readFile(t, filepath.Join(dir, "rules", "prometheus.rules.yml")), readFile(t, filepath.Join(dir, "rules", "blackbox.rules.yml"))} {
		require.NotRegexp(t, `\bP[012]\b`, f, "the files use the public severities only")
	}
	cfgPath := writeConfig(t, dir, cfg)

	// appliance check accepts them and says what it maps and ignores.
	out, err := exec.Command(binary, "check", "--config", cfgPath).CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, want := range []string{
		"SUCCESS",
		"warning: storage.tsdb.retention.time 15d is mapped to storage.retention.raw",
		"warning: storage.tsdb.retention.size 50GiB is not enforced",
		"warning: remote_read: 1 endpoint(s) are read by queries and rules besides the local storage",
		"warning: tracing is accepted and ignored",
		"warning: runtime is accepted and ignored",
		"warning: alerting.global.wechat_api_url is ignored",
		`warning: receiver "pager": pagerduty_configs is not supported by the appliance and is ignored`,
		`warning: receiver "slack": slack_configs keys color are ignored`,
		"warning: alerting.alertmanagers: the firing alerts of the rules are also sent to 1 Alertmanager config(s)",
	} {
		require.Contains(t, string(out), want)
	}

	p := start(t, cfgPath, filepath.Join(dir, "data"))

	wantOncall := []string{
		"BlackboxProbeFailed@http://broken.example.org",
		"BlackboxProbeHttpFailure@http://broken.example.org",
		"HostOutOfDiskSpace@" + host(node),
		"PrometheusTargetMissing@" + gone,
	}
	wantTeam := []string{
		"HostOutOfMemory@" + host(node),
		"PrometheusConfigurationReloadFailure@" + host(prom),
	}
	wantTickets := []string{"HostHighLoad@" + host(node)}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("oncall got %v\nteam got %v\ntickets got %v", oncall.firing(), team.firing(), tickets.firing())
		}
	})
	// The bound is generous: the first scrapes and evaluations of a
	// loaded, shared CI box can take long; the wait ends at the barrier.
	eventually(t, 240*time.Second, "every alert at its receiver", func() bool {
		return slices.Equal(oncall.firing(), wantOncall) && slices.Equal(team.firing(), wantTeam) && slices.Equal(tickets.firing(), wantTickets)
	})

	// The warning of HostOutOfDiskSpace fires and is inhibited by its
	// critical twin (source_match/target_match); it reached no receiver.
	eventually(t, 60*time.Second, "the inhibited warning in /api/v2/alerts", func() bool {
		code, body := p.getRaw("/api/v2/alerts?filter=" + urlQuery(`alertname="HostOutOfDiskSpace"`) + "&filter=" + urlQuery(`severity="warning"`))
		return code == http.StatusOK && strings.Contains(body, `"state":"suppressed"`) && strings.Contains(body, `"inhibitedBy":["`)
	})
	// The rules whose condition does not hold stay inactive.
	code, body := p.getRaw("/api/v1/rules?type=alert")
	require.Equal(t, http.StatusOK, code)
	var rules struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name  string `json:"name"`
					State string `json:"state"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &rules))
	states := map[string]string{}
	for _, g := range rules.Data.Groups {
		for _, r := range g.Rules {
			if states[r.Name] != "firing" {
				states[r.Name] = r.State
			}
		}
	}
	for _, quiet := range []string{"HostSwapIsFillingUp", "PrometheusRuleEvaluationFailures", "BlackboxSlowProbe"} {
		require.Equal(t, "inactive", states[quiet], quiet)
	}
	require.Equal(t, wantOncall, oncall.firing())
	require.Equal(t, wantTeam, team.firing(), "the inhibited warning reached no receiver")
	require.Equal(t, wantTickets, tickets.firing())

	// Each receiver's http_config: basic auth for team, a bearer token
	// for oncall. The payload is Alertmanager's: the group key of the
	// route, firing alerts without an end.
	auth, got, _ := team.snapshot()
	require.NotEmpty(t, auth)
	for _, a := range auth {
		require.Equal(t, "Basic YWxlcnRtYW5hZ2VyOmhvb2stcGFzcw==", a) // alertmanager:hook-pass
	}
	require.True(t, strings.HasPrefix(got[0].GroupKey, "{}:{alertname="), got[0].GroupKey)
	auth, got, _ = oncall.snapshot()
	for _, a := range auth {
		require.Equal(t, "Bearer oncall-token", a)
	}
	for _, pl := range got {
		require.True(t, strings.HasPrefix(pl.GroupKey, `{}/{severity="critical"}:{alertname="`), pl.GroupKey)
		for _, a := range pl.Alerts {
			if a.Status == "firing" {
				require.Equal(t, "0001-01-01T00:00:00Z", a.EndsAt)
			}
		}
	}

	// The rules' alerts also went to the Alertmanager of
	// alerting.alertmanagers, under its path_prefix, with its basic auth.
	eventually(t, 60*time.Second, "the alerts at the external Alertmanager", func() bool {
		_, _, names := extAM.snapshot()
		return slices.Contains(names, "BlackboxProbeFailed") && slices.Contains(names, "HostOutOfMemory") && slices.Contains(names, "HostHighLoad")
	})
	auth, _, _ = extAM.snapshot()
	for _, a := range auth {
		require.Equal(t, "Basic cHJvbWV0aGV1czpzM2NyZXQ=", a) // prometheus:s3cret
	}

	// An alert posted by an external vmalert with severity="critical"
	// routes like the rules' own.
	code, out2 := p.post("/api/v2/alerts", "application/json", []byte(`[{"labels":{"alertname":"VMAlertDiskFull","instance":"db1","severity":"critical"}}]`), nil)
	require.Equal(t, http.StatusOK, code, out2)
	eventually(t, 60*time.Second, "the posted critical alert at oncall", func() bool {
		return slices.Contains(oncall.firing(), "VMAlertDiskFull@db1")
	})
	exit, _ := p.stop()
	require.Equal(t, 0, exit)
}

func urlQuery(s string) string {
	return strings.NewReplacer(`"`, "%22", "=", "%3D", " ", "%20", "{", "%7B", "}", "%7D").Replace(s)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// copyTree copies the files under src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	}))
}

// alertmanagerBin returns the path of Alertmanager amtoolVersion, built
// from the Go module proxy by externalBinary (or taking $ALERTMANAGER).
func alertmanagerBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("ALERTMANAGER"); p != "" {
		return p
	}
	return externalBinary(t, "github.com/prometheus/alertmanager/cmd/alertmanager", amtoolVersion)
}

// TestForwardToRealAlertmanager: a real Alertmanager v0.28.1 named in
// alerting.alertmanagers takes the rules' alerts the appliance sends it
// and notifies its own webhook receiver with them.
func TestForwardToRealAlertmanager(t *testing.T) {
	amBin := alertmanagerBin(t)
	hook := newCompatSink(t, "/am-hook")
	dir := t.TempDir()
	amCfg := filepath.Join(dir, "alertmanager.yml")
	require.NoError(t, os.WriteFile(amCfg, []byte(`route:
  receiver: hook
  group_by: [alertname]
  group_wait: 1s
  group_interval: 1s
receivers:
  - name: hook
    webhook_configs:
      - url: `+hook.srv.URL+`/am-hook
`), 0o644))
	amAddr := freeAddr(t)
	am := exec.Command(amBin, "--config.file="+amCfg, "--storage.path="+filepath.Join(dir, "am-data"),
		"--web.listen-address="+amAddr, "--cluster.listen-address=", "--web.route-prefix=/am")
	var amOut strings.Builder
	am.Stdout, am.Stderr = &amOut, &amOut
	require.NoError(t, am.Start())
	amDone := make(chan struct{})
	go func() { _ = am.Wait(); close(amDone) }()
	t.Cleanup(func() {
		_ = am.Process.Kill()
		<-amDone
		if t.Failed() {
			t.Logf("alertmanager output:\n%s", amOut.String())
		}
	})
	eventually(t, 60*time.Second, "alertmanager ready", func() bool {
		resp, err := http.Get("http://" + amAddr + "/am/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	rules := filepath.Join(dir, "always.rules.yml")
	require.NoError(t, os.WriteFile(rules, []byte(`groups:
  - name: always
    rules:
      - alert: AlwaysFiring
        expr: vector(1) > 0
        labels: {severity: warning}
        annotations: {summary: "forwarded"}
`), 0o644))
	p := start(t, writeConfig(t, dir, `global: {evaluation_interval: 1s}
rule_files: [always.rules.yml]
alerting:
  alertmanagers:
    - path_prefix: /am
      static_configs:
        - targets: ['`+amAddr+`']
`), filepath.Join(dir, "data"))

	eventually(t, 60*time.Second, "the alert notified by the real Alertmanager", func() bool {
		_, got, _ := hook.snapshot()
		for _, pl := range got {
			for _, a := range pl.Alerts {
				if a.Labels["alertname"] == "AlwaysFiring" && a.Status == "firing" {
					return true
				}
			}
		}
		return false
	})
	_, got, _ := hook.snapshot()
	require.Equal(t, "hook", got[0].Receiver)
	require.Equal(t, "warning", got[0].Alerts[0].Labels["severity"])
	exit, _ := p.stop()
	require.Equal(t, 0, exit)
}
