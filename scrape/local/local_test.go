package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/aiserve/appliance/clock"
	"github.com/aiserve/appliance/storage"
	"github.com/aiserve/appliance/storage/storagetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, storagetest.LeakOptions()...)
}

// writeTree writes files (path -> content) under root.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(c), 0o644))
	}
}

// fakeHost is a /proc, /sys and / of a small box: two CPUs, one disk with
// a partition and a loop device, one NIC, a Raspberry Pi style thermal zone
// and a coretemp hwmon chip.
func fakeHost(t *testing.T) (proc, sys, rootfs string) {
	t.Helper()
	dir := t.TempDir()
	proc, sys, rootfs = filepath.Join(dir, "proc"), filepath.Join(dir, "sys"), filepath.Join(dir, "rootfs")
	writeTree(t, proc, map[string]string{
		"stat": `cpu  300 0 200 1000 10 0 5 0 0 0
cpu0 100 0 100 500 5 0 2 0 0 0
cpu1 200 0 100 500 5 0 3 0 0 0
intr 123456 0 0
ctxt 987654
btime 1764392986
processes 4321
procs_running 3
procs_blocked 1
`,
		"meminfo": `MemTotal:       16314260 kB
MemFree:         1234567 kB
MemAvailable:    8000000 kB
Active(anon):     100000 kB
HugePages_Total:       0
`,
		"loadavg": "0.52 0.58 0.59 1/1234 5678\n",
		"diskstats": `   8       0 sda 1000 10 20000 300 2000 20 40000 600 0 900 1200 0 0 0 0
   8       1 sda1 900 10 18000 250 1900 20 38000 550 0 800 1100 0 0 0 0
   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
`,
		"net/dev": `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
  eth0: 5000 50 1 2 0 0 0 0 7000 70 3 4 0 0 0 0
`,
		"mounts": `/dev/sda1 / ext4 rw,relatime 0 0
proc /proc proc rw 0 0
/dev/sda2 /mnt/models\040dir xfs ro,relatime 0 0
`,
	})
	writeTree(t, sys, map[string]string{
		"class/thermal/thermal_zone0/type":       "cpu-thermal\n",
		"class/thermal/thermal_zone0/temp":       "81234\n",
		"class/hwmon/hwmon1/name":                "coretemp\n",
		"class/hwmon/hwmon1/temp1_input":         "45000\n",
		"class/hwmon/hwmon1/temp1_max":           "100000\n",
		"class/hwmon/hwmon1/temp1_crit":          "105000\n",
		"class/hwmon/hwmon1/temp1_label":         "Package id 0\n",
		"devices/platform/coretemp.0/uevent":     "",
		"class/thermal/thermal_zone1/type":       "broken\n",
		"class/thermal/thermal_zone1/temp":       "garbage\n",
		"class/hwmon/hwmon2/name":                "nvme\n",
		"class/hwmon/hwmon2/temp1_input":         "38850\n",
		"class/hwmon/hwmon2/fan1_input":          "1200\n",
		"class/hwmon/hwmon2/temp2_input_garbage": "1\n",
	})
	require.NoError(t, os.Symlink(filepath.Join(sys, "devices/platform/coretemp.0"), filepath.Join(sys, "class/hwmon/hwmon1/device")))
	require.NoError(t, os.MkdirAll(filepath.Join(rootfs, "mnt/models dir"), 0o755))
	return proc, sys, rootfs
}

// fakeNvidiaSMI puts an nvidia-smi on PATH that prints the fixture for the
// query the reader must send, and fails like an old driver for the
// clocks_event_reasons names when old is set.
func fakeNvidiaSMI(t *testing.T, old bool) {
	t.Helper()
	dir := t.TempDir()
	fixture, err := filepath.Abs("testdata/nvidia-smi-query.csv")
	require.NoError(t, err)
	want := "--query-gpu=" + strings.Join(queryFields(old), ",")
	script := `#!/bin/sh
if [ "$1" != "` + want + `" ] || [ "$2" != "--format=csv,noheader,nounits" ]; then
  echo "Field \"$1\" is not a valid field to query." >&2
  exit 2
fi
cat "` + fixture + `"
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte(script), 0o755))
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

func values(ss []sample) map[string]float64 {
	out := map[string]float64{}
	for _, s := range ss {
		out[key(s.ls)] = s.v
	}
	return out
}

func newTestReader(t *testing.T, proc, sys, rootfs string) *Reader {
	t.Helper()
	opts := DefaultOptions()
	opts.ProcPath, opts.SysPath, opts.RootFSPath = proc, sys, rootfs
	opts.Instance = "box"
	opts.Appendable = storagetest.Open(t)
	r, err := New(opts)
	require.NoError(t, err)
	return r
}

func TestReadingsFromFakeTree(t *testing.T) {
	proc, sys, rootfs := fakeHost(t)
	fakeNvidiaSMI(t, false)
	got := values(newTestReader(t, proc, sys, rootfs).collect(context.Background()))

	base := `instance="box", job="local"`
	gpu := `DCGM_FI_DRIVER_VERSION="570.172.08", Hostname="box", UUID="GPU-5f3c2a9e-8b1d-4c7e-9a62-0d4e7b1f3a28", device="nvidia0", gpu="0", ` +
		base + `, modelName="NVIDIA H100 PCIe", pci_bus_id="00000000:01:00.0"`
	want := map[string]float64{
		`node_cpu_seconds_total{cpu="0", ` + base + `, mode="user"}`:                                              1,
		`node_cpu_seconds_total{cpu="1", ` + base + `, mode="idle"}`:                                              5,
		`node_cpu_seconds_total{cpu="1", ` + base + `, mode="softirq"}`:                                           0.03,
		`node_boot_time_seconds{` + base + `}`:                                                                    1764392986,
		`node_context_switches_total{` + base + `}`:                                                               987654,
		`node_procs_running{` + base + `}`:                                                                        3,
		`node_memory_MemAvailable_bytes{` + base + `}`:                                                            8000000 * 1024,
		`node_memory_Active_anon_bytes{` + base + `}`:                                                             100000 * 1024,
		`node_memory_HugePages_Total{` + base + `}`:                                                               0,
		`node_load1{` + base + `}`:                                                                                0.52,
		`node_load15{` + base + `}`:                                                                               0.59,
		`node_disk_read_bytes_total{device="sda", ` + base + `}`:                                                  20000 * 512,
		`node_disk_io_time_seconds_total{device="sda", ` + base + `}`:                                             0.9,
		`node_network_receive_bytes_total{device="eth0", ` + base + `}`:                                           5000,
		`node_network_transmit_drop_total{device="eth0", ` + base + `}`:                                           4,
		`node_filesystem_readonly{device="/dev/sda2", fstype="xfs", ` + base + `, mountpoint="/mnt/models dir"}`:  1,
		`node_thermal_zone_temp{` + base + `, type="cpu-thermal", zone="0"}`:                                      81.234,
		`node_hwmon_temp_celsius{chip="platform_coretemp_0", ` + base + `, sensor="temp1"}`:                       45,
		`node_hwmon_temp_crit_celsius{chip="platform_coretemp_0", ` + base + `, sensor="temp1"}`:                  105,
		`node_hwmon_chip_names{chip="platform_coretemp_0", chip_name="coretemp", ` + base + `}`:                   1,
		`node_hwmon_sensor_label{chip="platform_coretemp_0", ` + base + `, label="Package id 0", sensor="temp1"}`: 1,
		`node_hwmon_temp_celsius{chip="hwmon2", ` + base + `, sensor="temp1"}`:                                    38.85,
		`DCGM_FI_DEV_GPU_UTIL{` + gpu + `}`:                                                                       71,
		`DCGM_FI_DEV_FB_USED{` + gpu + `}`:                                                                        70412,
		`DCGM_FI_DEV_FB_FREE{` + gpu + `}`:                                                                        10554,
		`DCGM_FI_DEV_FB_TOTAL{` + gpu + `}`:                                                                       81559,
		`DCGM_FI_DEV_GPU_TEMP{` + gpu + `}`:                                                                       56,
		`DCGM_FI_DEV_MEMORY_TEMP{` + gpu + `}`:                                                                    63,
		`DCGM_FI_DEV_POWER_USAGE{` + gpu + `}`:                                                                    231.41,
		`DCGM_FI_DEV_SM_CLOCK{` + gpu + `}`:                                                                       1755,
		`DCGM_FI_DEV_MEM_CLOCK{` + gpu + `}`:                                                                      1593,
		`DCGM_FI_DEV_CLOCKS_EVENT_REASONS{` + gpu + `}`:                                                           0,
		`nvidia_smi_pstate{` + gpu + `}`:                                                                          0,
		`nvidia_smi_clocks_event_reason_active{` + strings.Replace(gpu, `pci_bus_id="00000000:01:00.0"`, `pci_bus_id="00000000:01:00.0", reason="hw_thermal_slowdown"`, 1) + `}`: 0,
	}
	for k, v := range want {
		g, ok := got[k]
		require.True(t, ok, "missing %s", k)
		require.InDelta(t, v, g, 1e-9, k)
	}
	// Ignored: partitions, loop devices, proc mounts, the broken zone, a
	// file that only looks like a sensor, and [N/A] fan speed.
	for k := range got {
		require.NotContains(t, k, `device="sda1"`)
		require.NotContains(t, k, `device="loop0"`)
		require.NotContains(t, k, `mountpoint="/proc"`)
		require.NotContains(t, k, `zone="1"`)
		require.NotContains(t, k, "DCGM_FI_DEV_FAN_SPEED")
	}
	require.Contains(t, got, `node_filesystem_size_bytes{device="/dev/sda1", fstype="ext4", `+base+`, mountpoint="/"}`)
	require.Len(t, filter(got, "node_cpu_seconds_total"), 16)
	require.Len(t, filter(got, "nvidia_smi_clocks_event_reason_active"), 6)
}

// TestGPUOldDriverNames: a driver that refuses clocks_event_reasons gets
// the clocks_throttle_reasons names, and keeps them.
func TestGPUOldDriverNames(t *testing.T) {
	fakeNvidiaSMI(t, true)
	r := newTestReader(t, "/nonexistent", "/nonexistent", "/nonexistent")
	for range 2 {
		got := values(r.collect(context.Background()))
		require.Len(t, filter(got, "DCGM_FI_DEV_GPU_UTIL"), 1)
	}
	require.True(t, r.gpu.throttle)
}

// TestAbsentReadings: no /proc files, no sensors, no nvidia-smi on PATH,
// and an nvidia-smi that fails (no driver): no error, no series.
func TestAbsentReadings(t *testing.T) {
	empty := t.TempDir()
	t.Setenv("PATH", empty)
	r := newTestReader(t, empty, empty, empty)
	require.Empty(t, r.collect(context.Background()))

	broken := filepath.Join(empty, "nvidia-smi")
	require.NoError(t, os.WriteFile(broken, []byte("#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'\nexit 9\n"), 0o755))
	require.Empty(t, r.collect(context.Background()))

	// A GPU-less box with sensors off and host readings on still works.
	proc, sys, rootfs := fakeHost(t)
	r = newTestReader(t, proc, sys, rootfs)
	got := values(r.collect(context.Background()))
	require.NotEmpty(t, filter(got, "node_load1"))
	require.Empty(t, filter(got, "DCGM_"))
}

// key prints a series as name{labels}.
func key(ls labels.Labels) string {
	return ls.Get(labels.MetricName) + labels.NewBuilder(ls).Del(labels.MetricName).Labels().String()
}

func filter(m map[string]float64, prefix string) []string {
	var out []string
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out
}

// TestRunWritesAndMarksStale: Run writes a round at once; a series that
// vanishes (a NIC removed) and, at shutdown, every series go stale.
func TestRunWritesAndMarksStale(t *testing.T) {
	proc, sys, rootfs := fakeHost(t)
	t.Setenv("PATH", t.TempDir())
	// The rounds' timestamps come from a clock that stands still: the
	// writer must keep each round, and the staleness markers, apart.
	clk := clock.NewFake(time.Now().Truncate(time.Second))
	db := storagetest.OpenOptions(t, storage.Options{Now: clk.Now})
	opts := DefaultOptions()
	opts.ProcPath, opts.SysPath, opts.RootFSPath, opts.Instance = proc, sys, rootfs, "box"
	opts.Appendable, opts.Interval, opts.Now = db, 20*time.Millisecond, clk.Now
	r, err := New(opts)
	require.NoError(t, err)

	nic := `{__name__="node_network_receive_bytes_total", device="eth0", instance="box", job="local"}`
	load := `{__name__="node_load1", instance="box", job="local"}`
	get := func(k string) (float64, bool) {
		v, ok := storagetest.Last(t, db, `{job="local"}`)[k]
		return v, ok
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	require.Eventually(t, func() bool { v, ok := get(nic); return ok && v == 5000 }, 10*time.Second, 5*time.Millisecond)

	require.NoError(t, os.Remove(filepath.Join(proc, "net/dev")))
	require.Eventually(t, func() bool { v, _ := get(nic); return value.IsStaleNaN(v) }, 10*time.Second, 5*time.Millisecond)
	v, _ := get(load)
	require.Equal(t, 0.52, v)

	cancel()
	require.NoError(t, <-done)
	v, _ = get(load)
	require.True(t, value.IsStaleNaN(v))
}

// TestVcgencmdThrottled: a fake vcgencmd answering get_throttled's
// throttled=0x50005 (under-voltage and throttled now; under-voltage and
// throttling since boot) gives the flags; one that fails adds nothing.
func TestVcgencmdThrottled(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "vcgencmd")
	require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\n[ \"$1\" = get_throttled ] || exit 2\necho throttled=0x50005\n"), 0o755))
	empty := t.TempDir()
	t.Setenv("PATH", empty)
	r := newTestReader(t, empty, empty, empty)
	r.opts.Vcgencmd = fake
	got := values(r.collect(context.Background()))
	want := map[string]float64{}
	for flag, v := range map[string][2]float64{"under_voltage": {1, 1}, "arm_frequency_capped": {0, 0}, "throttled": {1, 1}, "soft_temp_limit": {0, 0}} {
		want[`appliance_throttled{flag="`+flag+`", instance="box", job="local"}`] = v[0]
		want[`appliance_throttled_occurred{flag="`+flag+`", instance="box", job="local"}`] = v[1]
	}
	require.Equal(t, want, got)

	require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\necho 'VCHI initialization failed' >&2\nexit 1\n"), 0o755))
	require.Empty(t, r.collect(context.Background()))
	r.opts.Vcgencmd = "vcgencmd" // not on PATH
	require.Empty(t, r.collect(context.Background()))
}
