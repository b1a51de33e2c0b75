package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	promconfig "github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/config"
)

// Prometheus loads its config and rules, and the appliance its own: one
// group per repeat, each on its own series, routed with group_wait 0s.
func TestConfigsLoad(t *testing.T) {
	dir := t.TempDir()
	path, err := prometheusFiles(dir, "127.0.0.1:9100", "http://127.0.0.1:1/hook", "127.0.0.1:9093", 5*time.Second, 3)
	require.NoError(t, err)
	pc, err := promconfig.LoadFile(path, false, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Equal(t, model.Duration(5*time.Second), pc.GlobalConfig.EvaluationInterval)
	require.Len(t, pc.AlertingConfig.AlertmanagerConfigs, 1)
	data, err := os.ReadFile(filepath.Join(dir, "flip.rules.yml"))
	require.NoError(t, err)
	rgs, errs := rulefmt.Parse(data, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	require.Empty(t, errs)
	require.Len(t, rgs.Groups, 3)
	require.Equal(t, `flip_value{n="2"} > 0`, rgs.Groups[1].Rules[0].Expr)

	adir := t.TempDir()
	path, err = applianceFiles(adir, "127.0.0.1:9100", "http://127.0.0.1:1/hook", "", 5*time.Second, 3)
	require.NoError(t, err)
	ac, err := config.LoadFile(path)
	require.NoError(t, err)
	require.Equal(t, model.Duration(0), *ac.Alerting.Route.GroupWait)
	require.Equal(t, []string{"alertname", "n"}, ac.Alerting.Route.GroupBy)
}
