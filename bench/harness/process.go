package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// ErrKilled is returned by [Process.Stop] when the process did not exit
// within the grace period after SIGTERM and had to be killed: its data
// directory may then lack what a graceful shutdown would have flushed.
var ErrKilled = errors.New("process did not exit after SIGTERM and was killed")

// Process is a system under test running as a child process.
//
// The process runs in its own process group, so a Ctrl-C in the terminal
// reaches only the benchmark, which then stops it in order; Pdeathsig makes
// the kernel kill it if the benchmark dies without doing so. One goroutine
// per Process waits for the exit; it ends when the process does, which
// Stop and Kill guarantee.
type Process struct {
	Name string
	cmd  *exec.Cmd
	log  io.Closer

	done    chan struct{} // closed when the process has exited
	waitErr error         // set before done is closed
}

// Start runs bin with args, sending its stdout and stderr to the file
// logPath (created or truncated).
func Start(name, bin string, args []string, logPath string) (*Process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create log for %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	p := &Process{Name: name, cmd: cmd, log: logFile, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id, for [ReadProcStats].
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the process has exited, for whatever reason.
func (p *Process) Exited() <-chan struct{} { return p.done }

// ExitErr is the error from waiting for the process; valid once Exited is
// closed.
func (p *Process) ExitErr() error {
	<-p.done
	return p.waitErr
}

// Stop sends SIGTERM and waits up to grace for the process to exit, then
// kills it and returns [ErrKilled]. It returns the exit error if the process
// exited non-zero on its own. Calling Stop on an exited process is safe.
func (p *Process) Stop(grace time.Duration) error {
	select {
	case <-p.done:
		return p.exitError()
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("send SIGTERM to %s: %w", p.Name, err)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return p.exitError()
	case <-t.C:
		p.Kill()
		return fmt.Errorf("%s after %s: %w", p.Name, grace, ErrKilled)
	}
}

// Kill kills the process group with SIGKILL and waits for the process to
// exit. It is safe to call more than once and after Stop.
func (p *Process) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	// Negative pid: the whole group, in case the system forked helpers.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

func (p *Process) exitError() error {
	<-p.done
	if p.waitErr != nil {
		return fmt.Errorf("%s exited: %w", p.Name, p.waitErr)
	}
	return nil
}

// Alive returns nil while the process runs and, once it has exited, an
// error saying that it exited early (with its exit error), for a benchmark
// that finds it gone while measuring it.
func (p *Process) Alive() error {
	select {
	case <-p.done:
	default:
		return nil
	}
	if p.waitErr != nil {
		return fmt.Errorf("%s exited early (see its log): %w", p.Name, p.waitErr)
	}
	return fmt.Errorf("%s exited early with status 0 (see its log)", p.Name)
}

// Sleep waits for d while the process runs. It returns early with the
// context's cause if ctx ends, or with the error of [Process.Alive] if the
// process exits, so that a warm-up or a measuring window never goes on
// after the system died.
func (p *Process) Sleep(ctx context.Context, d time.Duration) error {
	if slept, err := sleep(ctx, d, p.done); err != nil || slept {
		return err
	}
	return p.Alive()
}
