package harness

import (
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// GoInstall makes sure binDir holds the command pkg built at module version
// version, running `go install pkg@version` with GOBIN=binDir when it does
// not, and returns the binary's path. A binary already there is kept only
// if its embedded build info names the same package and version, so
// bumping the version in the caller rebuilds it. Output of the go command
// goes to log.
//
// Building Prometheus from scratch takes about 5 minutes on 2 cores.
func GoInstall(ctx context.Context, binDir, pkg, version string, log io.Writer) (string, error) {
	bin := filepath.Join(binDir, path.Base(pkg))
	if ok, err := hasBuildInfo(bin, pkg, version); err != nil {
		return "", err
	} else if ok {
		return bin, nil
	}
	abs, err := filepath.Abs(binDir)
	if err != nil {
		return "", fmt.Errorf("resolve bin dir %q: %w", binDir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", fmt.Errorf("create bin dir: %w", err)
	}
	cmd := exec.CommandContext(ctx, "go", "install", pkg+"@"+version)
	// Outside any module and workspace, so that neither this module's
	// go.mod nor a go.work file can change what gets built.
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOBIN="+abs, "GOWORK=off", "GOFLAGS=")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go install %s@%s: %w", pkg, version, err)
	}
	if ok, err := hasBuildInfo(bin, pkg, version); err != nil {
		return "", err
	} else if !ok {
		return "", fmt.Errorf("go install %s@%s did not write %s with that version", pkg, version, bin)
	}
	return bin, nil
}

// GoBuildInModule is [GoInstall] for a command whose module is the
// package itself (pkg is the module path) when `go install pkg@version`
// cannot run: it builds pkg in a throwaway module that requires
// pkg@version, with `go get` and `go build`, into binDir. The binary is
// kept if its build info lists pkg at version as a dependency.
func GoBuildInModule(ctx context.Context, binDir, pkg, version string, log io.Writer) (string, error) {
	bin := filepath.Join(binDir, path.Base(pkg))
	if info, err := buildinfo.ReadFile(bin); err == nil {
		for _, d := range info.Deps {
			if d.Path == pkg && d.Version == version {
				return bin, nil
			}
		}
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		return "", fmt.Errorf("resolve bin dir %q: %w", binDir, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return "", fmt.Errorf("create bin dir: %w", err)
	}
	mod, err := os.MkdirTemp("", "gobuild-")
	if err != nil {
		return "", fmt.Errorf("create build module: %w", err)
	}
	defer os.RemoveAll(mod)
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module gobuild\n\ngo 1.24\n"), 0o644); err != nil {
		return "", fmt.Errorf("write build module: %w", err)
	}
	for _, args := range [][]string{{"get", pkg + "@" + version}, {"build", "-o", abs, pkg}} {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = mod
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
		}
	}
	return bin, nil
}

// hasBuildInfo reports whether bin exists and was built from pkg at version.
func hasBuildInfo(bin, pkg, version string) (bool, error) {
	info, err := buildinfo.ReadFile(bin)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		// Not a Go binary or truncated by an interrupted build: rebuild.
		return false, nil
	}
	return info.Path == pkg && info.Main.Version == version, nil
}

// GoBuild runs `go build -o out pkg` in moduleDir. The go command's cache
// makes this cheap when nothing changed, so callers always run it.
func GoBuild(ctx context.Context, moduleDir, pkg, out string, log io.Writer) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = moduleDir
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s in %s: %w", pkg, moduleDir, err)
	}
	return nil
}

// ModuleRoot walks up from dir to the nearest directory holding a go.mod.
func ModuleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolve %q: %w", dir, err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod in this directory or any parent: run from inside the module")
		}
		dir = parent
	}
}
