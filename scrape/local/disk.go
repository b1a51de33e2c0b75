package local

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
)

// diskIgnore is node_exporter's default --collector.diskstats.device-exclude:
// partitions, RAM and loop devices would count the same I/O twice or not be
// disks at all.
var diskIgnore = regexp.MustCompile(`^(z?ram|loop|fd|(h|s|v|xv)d[a-z]|nvme\d+n\d+p)\d+$`)

// diskFields are the /proc/diskstats columns after the device name, with
// the factor that turns them into node_exporter's units (sectors are 512
// bytes whatever the device's block size; times are in ms).
var diskFields = []struct {
	col    int
	fam    family
	factor float64
}{
	{3, counter("node_disk_reads_completed_total", "The total number of reads completed successfully."), 1},
	{4, counter("node_disk_reads_merged_total", "The total number of reads merged."), 1},
	{5, counter("node_disk_read_bytes_total", "The total number of bytes read successfully."), 512},
	{6, counter("node_disk_read_time_seconds_total", "The total number of seconds spent by all reads."), 0.001},
	{7, counter("node_disk_writes_completed_total", "The total number of writes completed successfully."), 1},
	{8, counter("node_disk_writes_merged_total", "The number of writes merged."), 1},
	{9, counter("node_disk_written_bytes_total", "The total number of bytes written successfully."), 512},
	{10, counter("node_disk_write_time_seconds_total", "This is the total number of seconds spent by all writes."), 0.001},
	{11, gauge("node_disk_io_now", "The number of I/Os currently in progress."), 1},
	{12, counter("node_disk_io_time_seconds_total", "Total seconds spent doing I/Os."), 0.001},
	{13, counter("node_disk_io_time_weighted_seconds_total", "The weighted # of seconds spent doing I/Os."), 0.001},
}

// readDiskstats reads /proc/diskstats.
func readDiskstats(b *batch, proc string) {
	data, err := os.ReadFile(filepath.Join(proc, "diskstats"))
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 14 || diskIgnore.MatchString(f[2]) {
			continue
		}
		for _, df := range diskFields {
			if v, err := strconv.ParseFloat(f[df.col], 64); err == nil {
				b.add(df.fam, v*df.factor, "device", f[2])
			}
		}
	}
}

// fsTypeIgnore and mountIgnore are node_exporter's defaults
// (--collector.filesystem.fs-types-exclude, mount-points-exclude), plus
// network filesystems: statfs on a hung NFS server blocks, and the
// appliance watches its own disks.
var (
	fsTypeIgnore = regexp.MustCompile(`^(autofs|binfmt_misc|bpf|cgroup2?|configfs|debugfs|devpts|devtmpfs|fusectl|fuse\..*|hugetlbfs|iso9660|mqueue|nsfs|overlay|proc|procfs|pstore|rpc_pipefs|securityfs|selinuxfs|squashfs|erofs|sysfs|tracefs|nfs4?|cifs|smb3?)$`)
	mountIgnore  = regexp.MustCompile(`^/(dev|proc|run/credentials/.+|sys|var/lib/docker/.+|var/lib/containers/storage/.+)($|/)`)

	famFSSize     = gauge("node_filesystem_size_bytes", "Filesystem size in bytes.")
	famFSFree     = gauge("node_filesystem_free_bytes", "Filesystem free space in bytes.")
	famFSAvail    = gauge("node_filesystem_avail_bytes", "Filesystem space available to non-root users in bytes.")
	famFSFiles    = gauge("node_filesystem_files", "Filesystem total file nodes.")
	famFSFilesFre = gauge("node_filesystem_files_free", "Filesystem total free file nodes.")
	famFSRO       = gauge("node_filesystem_readonly", "Filesystem read-only status.")
)

// readFilesystems lists the mounts in /proc/1/mounts (the host's when the
// appliance runs in a container with the host's /proc), or /proc/mounts,
// and statfs()s each under rootfs.
func readFilesystems(b *batch, proc, rootfs string) {
	data, err := os.ReadFile(filepath.Join(proc, "1", "mounts"))
	if err != nil {
		if data, err = os.ReadFile(filepath.Join(proc, "mounts")); err != nil {
			return
		}
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		dev, mnt, typ, opts := f[0], unescapeMount(f[1]), f[2], f[3]
		if fsTypeIgnore.MatchString(typ) || mountIgnore.MatchString(mnt) || seen[mnt] {
			continue
		}
		seen[mnt] = true
		var st syscall.Statfs_t
		if err := syscall.Statfs(filepath.Join(rootfs, mnt), &st); err != nil {
			continue
		}
		kv := []string{"device", dev, "fstype", typ, "mountpoint", mnt}
		bs := float64(st.Bsize)
		b.add(famFSSize, float64(st.Blocks)*bs, kv...)
		b.add(famFSFree, float64(st.Bfree)*bs, kv...)
		b.add(famFSAvail, float64(st.Bavail)*bs, kv...)
		b.add(famFSFiles, float64(st.Files), kv...)
		b.add(famFSFilesFre, float64(st.Ffree), kv...)
		ro := 0.0
		for _, o := range strings.Split(opts, ",") {
			if o == "ro" {
				ro = 1
			}
		}
		b.add(famFSRO, ro, kv...)
	}
}

// unescapeMount undoes the octal escapes of /proc/mounts (\040 is a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				out.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		out.WriteByte(s[i])
	}
	return out.String()
}
