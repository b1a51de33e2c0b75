package config

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUIDashboardsDir(t *testing.T) {
	cfg, err := Load([]byte("ui:\n  dashboards_dir: dash\n"), filepath.Join("/etc", "appliance", "appliance.yml"))
	require.NoError(t, err)
	require.Equal(t, filepath.Join("/etc", "appliance", "dash"), cfg.UI.DashboardsDir)

	cfg, err = Load([]byte("ui:\n  dashboards_dir: /srv/dash\n"), "appliance.yml")
	require.NoError(t, err)
	require.Equal(t, "/srv/dash", cfg.UI.DashboardsDir)

	cfg, err = Load(nil, "appliance.yml")
	require.NoError(t, err)
	require.Empty(t, cfg.UI.DashboardsDir)

	_, err = Load([]byte("ui:\n  dashboard_dir: dash\n"), "appliance.yml")
	require.ErrorContains(t, err, "appliance.yml:2")
	require.ErrorContains(t, err, "dashboard_dir")
}
