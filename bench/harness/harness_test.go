package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseStatCPU(t *testing.T) {
	f := func(stat string, want time.Duration) {
		t.Helper()
		got, err := parseStatCPU([]byte(stat))
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	// utime=250 stime=50 ticks: 3s. The command name has a space and a ')'.
	f("4242 (victoria metrics)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 100 1000 200", 3*time.Second)
	f("1 (init) S 0 1 1 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 1 1000 200", 100*time.Millisecond)

	_, err := parseStatCPU([]byte("1 (init) S 0 1"))
	require.Error(t, err)
}

func TestParseStatusMemory(t *testing.T) {
	status := "Name:\tprometheus\nVmPeak:\t 999 kB\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nThreads:\t9\n"
	rss, hwm, err := parseStatusMemory([]byte(status))
	require.NoError(t, err)
	require.Equal(t, uint64(1024*1024), rss)
	require.Equal(t, uint64(2048*1024), hwm)

	_, _, err = parseStatusMemory([]byte("Name:\tkthreadd\n"))
	require.Error(t, err)
}

func TestSumTextMetric(t *testing.T) {
	page := `# HELP prometheus_tsdb_head_samples_appended_total Total number of appended samples.
# TYPE prometheus_tsdb_head_samples_appended_total counter
prometheus_tsdb_head_samples_appended_total{type="float"} 1.5e+06
prometheus_tsdb_head_samples_appended_total{type="histogram"} 10
prometheus_tsdb_head_samples_appended_total_extra 99
vm_rows_added_to_storage_total 12345
weird{l="a}b \"c\"",m="x"} 2 1700000000000
weird 3
`
	f := func(name string, want float64) {
		t.Helper()
		got, err := sumTextMetric(strings.NewReader(page), name)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	f("prometheus_tsdb_head_samples_appended_total", 1500010)
	f("vm_rows_added_to_storage_total", 12345)
	f("weird", 5)

	_, err := sumTextMetric(strings.NewReader(page), "appliance_storage_samples_appended_total")
	require.ErrorIs(t, err, ErrNoSuchMetric)
}

func TestMedian(t *testing.T) {
	require.Equal(t, time.Duration(0), Median(nil))
	require.Equal(t, 2*time.Second, Median([]time.Duration{3 * time.Second, time.Second, 2 * time.Second}))
	require.Equal(t, 2500*time.Millisecond, Median([]time.Duration{4 * time.Second, time.Second, 2 * time.Second, 3 * time.Second}))
}

func TestTableMarkdown(t *testing.T) {
	tb := Table{Header: []string{"metric", "A", "B"}}
	tb.AddRow("peak RSS", "1.0 GiB", "12 MiB")
	tb.AddRow("x", "1")
	want := "" +
		"| metric   |       A |      B |\n" +
		"| -------- | ------: | -----: |\n" +
		"| peak RSS | 1.0 GiB | 12 MiB |\n" +
		"| x        |       1 |        |\n"
	require.Equal(t, want, tb.Markdown())
}

func TestBytes(t *testing.T) {
	require.Equal(t, "512 B", Bytes(512))
	require.Equal(t, "1.5 KiB", Bytes(1536))
	require.Equal(t, "2.0 GiB", Bytes(2<<30))
}

func TestProcessStopAndStats(t *testing.T) {
	dir := t.TempDir()
	p, err := Start("sleep", "/bin/sleep", []string{"60"}, dir+"/sleep.log")
	require.NoError(t, err)
	defer p.Kill()

	s, err := ReadProcStats(p.Pid())
	require.NoError(t, err)
	require.NotZero(t, s.PeakRSS)

	// sleep dies of SIGTERM, which Wait reports as an error: Stop must
	// return promptly and not claim it had to kill.
	err = p.Stop(5 * time.Second)
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrKilled)
	require.Equal(t, err.Error(), p.Stop(time.Second).Error(), "a second Stop reports the same exit")
}
