package local

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

var (
	famZoneTemp   = gauge("node_thermal_zone_temp", "Zone temperature in Celsius.")
	famHwmonTemp  = gauge("node_hwmon_temp_celsius", "Hardware monitor for temperature (input).")
	famHwmonMax   = gauge("node_hwmon_temp_max_celsius", "Hardware monitor for temperature (max).")
	famHwmonCrit  = gauge("node_hwmon_temp_crit_celsius", "Hardware monitor for temperature (crit).")
	famHwmonChip  = gauge("node_hwmon_chip_names", "Annotation metric for human-readable chip names.")
	famHwmonLabel = gauge("node_hwmon_sensor_label", "Label for given chip and sensor.")

	tempFile = regexp.MustCompile(`^temp(\d+)_(input|max|crit|label)$`)
	nonWord  = regexp.MustCompile(`[^a-zA-Z0-9_]`)
)

// readMilli reads a sysfs file holding millidegrees Celsius.
func readMilli(path string) (float64, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
	if err != nil {
		return 0, false
	}
	return v / 1000, true
}

// readThermalZones reads /sys/class/thermal/thermal_zone*/{type,temp}. On
// a Raspberry Pi thermal_zone0 is cpu-thermal, which throttles at 80 °C.
func readThermalZones(b *batch, sys string) {
	zones, _ := filepath.Glob(filepath.Join(sys, "class", "thermal", "thermal_zone*"))
	for _, z := range zones {
		zone := strings.TrimPrefix(filepath.Base(z), "thermal_zone")
		t, ok := readMilli(filepath.Join(z, "temp"))
		if !ok {
			continue
		}
		typ, _ := os.ReadFile(filepath.Join(z, "type"))
		b.add(famZoneTemp, t, "type", strings.TrimSpace(string(typ)), "zone", zone)
	}
}

// readHwmon reads the temperature sensors of /sys/class/hwmon/hwmon*, named
// the way node_exporter names them.
func readHwmon(b *batch, sys string) {
	dirs, _ := filepath.Glob(filepath.Join(sys, "class", "hwmon", "hwmon*"))
	for _, dir := range dirs {
		chip := hwmonChip(dir)
		if name, err := os.ReadFile(filepath.Join(dir, "name")); err == nil {
			b.add(famHwmonChip, 1, "chip", chip, "chip_name", strings.TrimSpace(string(name)))
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		names := make([]string, 0, len(entries))
		for _, e := range entries {
			names = append(names, e.Name())
		}
		sort.Strings(names)
		for _, n := range names {
			m := tempFile.FindStringSubmatch(n)
			if m == nil {
				continue
			}
			sensor := "temp" + m[1]
			path := filepath.Join(dir, n)
			switch m[2] {
			case "label":
				if l, err := os.ReadFile(path); err == nil {
					b.add(famHwmonLabel, 1, "chip", chip, "label", strings.TrimSpace(string(l)), "sensor", sensor)
				}
				continue
			}
			v, ok := readMilli(path)
			if !ok {
				continue
			}
			fam := map[string]family{"input": famHwmonTemp, "max": famHwmonMax, "crit": famHwmonCrit}[m[2]]
			b.add(fam, v, "chip", chip, "sensor", sensor)
		}
	}
}

// hwmonChip names a chip as node_exporter does: from its device link
// ("platform_coretemp_0", "pci0000:00_0000:00:18_3"), else from the hwmon
// directory ("hwmon0").
func hwmonChip(dir string) string {
	if dev, err := filepath.EvalSymlinks(filepath.Join(dir, "device")); err == nil {
		prefix, name := filepath.Split(dev)
		typ := filepath.Base(strings.TrimRight(prefix, "/"))
		name = nonWord.ReplaceAllString(name, "_")
		typ = nonWord.ReplaceAllString(typ, "_")
		switch {
		case typ != "" && name != "" && typ != "_":
			return typ + "_" + name
		case name != "":
			return name
		}
	}
	return filepath.Base(dir)
}
