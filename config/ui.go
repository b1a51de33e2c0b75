package config

import (
	commoncfg "github.com/prometheus/common/config"
)

// UIConfig is the ui section: the built-in dashboard.
type UIConfig struct {
	// DashboardsDir holds user dashboards (*.yaml, *.yml, *.json, in the
	// embedded dashboards' format), listed next to the embedded ones. A
	// relative path is resolved against the configuration file's
	// directory. A file that does not load is reported, naming it; the
	// others still load.
	DashboardsDir string `yaml:"dashboards_dir,omitempty"`
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (c *UIConfig) UnmarshalYAML(unmarshal func(any) error) error {
	*c = UIConfig{}
	type plain UIConfig
	return unmarshal((*plain)(c))
}

func (c *UIConfig) setDirectory(dir string) {
	if c.DashboardsDir != "" {
		c.DashboardsDir = commoncfg.JoinDir(dir, c.DashboardsDir)
	}
}
