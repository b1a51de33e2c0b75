// Package packaging holds the appliance's packaging, which is not Go: the
// systemd unit (appliance.service), the container file (Containerfile)
// and, in the Makefile, `make release`, which writes
// appliance-VERSION-OS-ARCH.tar.gz for linux/amd64, linux/arm64 and
// darwin/arm64 plus SHA256SUMS into dist/. The package's test builds the
// linux/arm64 archive as `make release-archives` does (CGO off,
// cross-compiled), checks its contents, checksum and ELF header (AArch64,
// static), and starts the binary under qemu-user (Debian's qemu-user,
// which .ci/run installs), with Prometheus' flag names.
//
// # Caveats
//
// Without qemu-aarch64 the test checks only the ELF header, and fails
// under CI=true. The test does not build the dashboard bundle (make web)
// and does not build the container image (no container engine in CI).
package packaging
