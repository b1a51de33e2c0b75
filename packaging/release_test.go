package packaging

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const testVersion = "9.8.7-test"

// TestReleaseArchiveLinuxARM64 builds the linux/arm64 release archive
// with the Makefile's release-archives target, checks what it holds and
// its checksum, checks the binary's ELF header and starts it under
// qemu-user.
func TestReleaseArchiveLinuxARM64(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is needed to build the release archives")
	}
	dist := t.TempDir()
	cmd := exec.Command("make", "-C", "..", "release-archives", "RELEASE_PLATFORMS=linux/arm64", "DIST="+dist, "VERSION="+testVersion)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make release-archives:\n%s", out)

	name := "appliance-" + testVersion + "-linux-arm64"
	archive := filepath.Join(dist, name+".tar.gz")
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	require.NoError(t, err)
	data, err := os.ReadFile(archive)
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	require.Equal(t, hex.EncodeToString(sum[:])+"  "+name+".tar.gz\n", string(sums), "SHA256SUMS in sha256sum's format")

	dir := t.TempDir()
	files := untar(t, archive, dir)
	require.ElementsMatch(t, []string{name + "/appliance", name + "/README.md", name + "/appliance.service", name + "/Containerfile"}, files)
	bin := filepath.Join(dir, name, "appliance")

	checkELF(t, bin)
	checkUnit(t, bin)

	qemu, err := exec.LookPath("qemu-aarch64")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("qemu-aarch64 not found (CI=true): install Debian's qemu-user package (.ci/run does)")
		}
		t.Log("qemu-aarch64 not found: checked the ELF header only")
		return
	}
	startUnderQEMU(t, qemu, bin)
}

func untar(t *testing.T, archive, dir string) []string {
	t.Helper()
	f, err := os.Open(archive)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		require.Zero(t, h.Uid, "files owned by root in the archive")
		if h.Typeflag != tar.TypeReg {
			continue
		}
		names = append(names, h.Name)
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		w, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, os.FileMode(h.Mode))
		require.NoError(t, err)
		_, err = io.Copy(w, tr)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	}
	return names
}

// checkELF: an AArch64 Linux executable, statically linked (no
// interpreter, no shared libraries: CGO was off).
func checkELF(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	require.NoError(t, err)
	defer f.Close()
	require.Equal(t, elf.EM_AARCH64, f.Machine)
	require.Equal(t, elf.ELFCLASS64, f.Class)
	require.Equal(t, elf.ET_EXEC, f.Type)
	for _, p := range f.Progs {
		require.NotEqual(t, elf.PT_INTERP, p.Type, "a dynamic loader: the binary is not static")
		require.NotEqual(t, elf.PT_DYNAMIC, p.Type, "dynamic section: the binary is not static")
	}
	libs, err := f.ImportedLibraries()
	require.NoError(t, err)
	require.Empty(t, libs)
}

// checkUnit runs systemd-analyze verify on the unit, with the binary it
// starts pointed at the archive's, where systemd-analyze is installed.
func checkUnit(t *testing.T, bin string) {
	t.Helper()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not found: the unit is not verified")
		return
	}
	unit, err := os.ReadFile(filepath.Join(filepath.Dir(bin), "appliance.service"))
	require.NoError(t, err)
	text := string(unit)
	for _, s := range []string{"User=appliance", "StateDirectory=appliance", "--data /var/lib/appliance", "NoNewPrivileges=yes", "ProtectSystem=strict", "CapabilityBoundingSet=\n"} {
		require.Contains(t, text, s)
	}
	p := filepath.Join(t.TempDir(), "appliance.service")
	require.NoError(t, os.WriteFile(p, []byte(strings.ReplaceAll(text, "/usr/local/bin/appliance", bin)), 0o644))
	out, err := exec.Command(analyze, "verify", p).CombinedOutput()
	require.NoError(t, err, "systemd-analyze verify:\n%s", out)
	require.Empty(t, strings.TrimSpace(string(out)), "systemd-analyze verify has no complaints")
}

var listenRe = regexp.MustCompile(`msg="appliance started".* listen=(\S+)`)

// startUnderQEMU runs `appliance version`, then `appliance` with
// Prometheus' flag names on a free port (port 0, read from its log), asks
// /-/ready and buildinfo, and stops it with SIGTERM.
func startUnderQEMU(t *testing.T, qemu, bin string) {
	t.Helper()
	out, err := exec.Command(qemu, bin, "version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "appliance "+testVersion)
	require.Contains(t, string(out), "linux/arm64")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	data := t.TempDir()
	cmd := exec.CommandContext(ctx, qemu, bin,
		"--storage.tsdb.path="+data, "--web.listen-address=127.0.0.1:0", "--log.format=logfmt")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	var addr string
	var log []string
	for addr == "" {
		line, ok := <-lines
		if !ok {
			t.Fatalf("the arm64 binary exited before it started: %v\n%s", <-exited, strings.Join(log, "\n"))
		}
		log = append(log, line)
		if m := listenRe.FindStringSubmatch(line); m != nil {
			addr = m[1]
		}
	}
	go func() {
		for range lines {
		}
	}()
	// The listener is bound and the server marked ready right after the
	// log line; the request waits in the listen backlog until it serves.
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Get("http://" + addr + "/-/ready")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	t.Logf("the linux/arm64 binary is ready under %s at %s", qemu, addr)
	resp, err = client.Get("http://" + addr + "/api/v1/status/buildinfo")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(body), `"applianceVersion":"`+testVersion+`"`)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-exited, "a clean shutdown under qemu")
}
