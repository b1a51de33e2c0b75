// Package local reads the box the appliance runs on: host CPU, memory,
// load, disks, filesystems and network from /proc and /sys
// (node_exporter's names), temperatures from /sys/class/thermal and hwmon,
// a Raspberry Pi's throttle flags from `vcgencmd get_throttled`
// (appliance_throttled{flag} now, appliance_throttled_occurred{flag}
// since boot),
// and NVIDIA GPUs through nvidia-smi (DCGM exporter's names, so that rules
// written for either work on both).
//
// # Basics
//
// A Reader collects every enabled reading on its interval and writes the
// series through a storage.AppendableV2, one commit per round, with the
// labels job="local" and instance="<hostname>". Series that a round no
// longer has (a disk unplugged, a GPU gone) and, on shutdown, all series get
// Prometheus' staleness marker, as the scrape loop does for a target.
//
// The readings are written directly rather than served on a loopback
// /metrics page and scraped: no port is opened for them, no text is
// encoded and parsed again, and the targets list shows only what the
// operator configured or auto-detection found.
//
// # Caveats
//
// A reading the box does not have (no GPU, no nvidia-smi, no hwmon, a
// file that is not there) is silently absent: no error, no series.
// Paths are options (Options.ProcPath, SysPath, RootFSPath, NvidiaSMI, Vcgencmd) so
// tests use a fake tree, a fake nvidia-smi and a fake vcgencmd, and a containerised
// appliance can read the host's.
package local
