package config

import (
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/common/model"
)

// CollectorsConfig switches the local readings (host, thermal, GPU). Every
// reading that the box does not have is silently absent, so all are on by
// default.
type CollectorsConfig struct {
	// Enabled switches every local reading; false turns them all off.
	Enabled bool `yaml:"enabled"`
	// Host: CPU, memory, load, disks, filesystems and network from /proc
	// and /sys (node_exporter's names).
	Host bool `yaml:"host"`
	// Thermal: /sys/class/thermal zones and hwmon temperature sensors.
	Thermal bool `yaml:"thermal"`
	// GPU: NVIDIA GPUs through nvidia-smi (DCGM exporter's names).
	GPU bool `yaml:"gpu"`
	// Interval between readings; 0 means the global scrape_interval.
	Interval model.Duration `yaml:"interval,omitempty"`
	// NvidiaSMI is the nvidia-smi command, looked up on PATH unless it is
	// a path.
	NvidiaSMI string `yaml:"nvidia_smi"`
	// Vcgencmd is the Raspberry Pi's vcgencmd, looked up on PATH unless it
	// is a path; with thermal on, its get_throttled flags are read when
	// it is there.
	Vcgencmd string `yaml:"vcgencmd"`
	// ProcPath, SysPath and RootFSPath are where the host's /proc, /sys
	// and / are mounted (node_exporter's --path.procfs, --path.sysfs and
	// --path.rootfs), for an appliance in a container.
	ProcPath   string `yaml:"proc_path"`
	SysPath    string `yaml:"sys_path"`
	RootFSPath string `yaml:"rootfs_path"`
}

// DefaultCollectorsConfig has every local reading on.
var DefaultCollectorsConfig = CollectorsConfig{
	Enabled:    true,
	Host:       true,
	Thermal:    true,
	GPU:        true,
	NvidiaSMI:  "nvidia-smi",
	Vcgencmd:   "vcgencmd",
	ProcPath:   "/proc",
	SysPath:    "/sys",
	RootFSPath: "/",
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (c *CollectorsConfig) UnmarshalYAML(unmarshal func(any) error) error {
	*c = DefaultCollectorsConfig
	type plain CollectorsConfig
	if err := unmarshal((*plain)(c)); err != nil {
		return err
	}
	if c.Interval < 0 {
		return fieldErrorf([]string{"interval"}, "collectors interval must be greater than 0")
	}
	for _, p := range []struct {
		key string
		val string
	}{{"nvidia_smi", c.NvidiaSMI}, {"vcgencmd", c.Vcgencmd}, {"proc_path", c.ProcPath}, {"sys_path", c.SysPath}, {"rootfs_path", c.RootFSPath}} {
		if p.val == "" {
			return fieldErrorf([]string{p.key}, "collectors %s must not be empty (leave the key out for the default)", p.key)
		}
	}
	return nil
}

// AutodetectConfig controls the auto-detection of local model servers.
type AutodetectConfig struct {
	Enabled bool `yaml:"enabled"`
	// Host is where the servers are looked for.
	Host string `yaml:"host"`
	// Ports are tried in order; what answers is recognised by its
	// /metrics (or, for Ollama, its API).
	Ports []int `yaml:"ports,flow"`
	// Interval between two looks; the first is at start.
	Interval model.Duration `yaml:"interval"`
	// Probes adds an llm probe for each OpenAI-compatible server found.
	Probes bool `yaml:"probes"`
}

// DefaultAutodetectPorts are the default ports of vLLM (8000, and 8001..8003
// for the second to fourth instance on a box), TGI (3000, and 80 in its
// Docker image), Triton's metrics (8002), SGLang (30000), Ollama (11434),
// DCGM exporter (9400) and node_exporter (9100).
var DefaultAutodetectPorts = []int{8000, 8001, 8002, 8003, 30000, 3000, 80, 11434, 9400, 9100}

// DefaultAutodetectConfig has auto-detection on.
var DefaultAutodetectConfig = AutodetectConfig{
	Enabled:  true,
	Host:     "localhost",
	Ports:    DefaultAutodetectPorts,
	Interval: model.Duration(2 * time.Minute),
	Probes:   true,
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (c *AutodetectConfig) UnmarshalYAML(unmarshal func(any) error) error {
	*c = DefaultAutodetectConfig
	c.Ports = slices.Clone(DefaultAutodetectPorts)
	type plain AutodetectConfig
	if err := unmarshal((*plain)(c)); err != nil {
		return err
	}
	if c.Host == "" {
		return fieldErrorf([]string{"host"}, "autodetect host must not be empty (leave the key out for localhost)")
	}
	if c.Interval < model.Duration(10*time.Second) {
		return fieldErrorf([]string{"interval"}, "autodetect interval %s is too short; use 10s or more", c.Interval)
	}
	seen := map[int]bool{}
	for _, p := range c.Ports {
		if p < 1 || p > 65535 {
			return fieldErrorf([]string{"ports"}, "autodetect port %d is not a TCP port (1-65535)", p)
		}
		if seen[p] {
			return fieldErrorf([]string{"ports"}, "autodetect port %d is listed twice", p)
		}
		seen[p] = true
	}
	if c.Enabled && len(c.Ports) == 0 {
		return fieldErrorf([]string{"ports"}, "autodetect ports is empty; list ports or set enabled: false")
	}
	return nil
}

// String is for logs.
func (c AutodetectConfig) String() string {
	return fmt.Sprintf("host=%s ports=%v interval=%s", c.Host, c.Ports, c.Interval)
}
