package harness

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// Exit statuses of a benchmark command, returned by [Main].
const (
	ExitOK          = 0
	ExitFailed      = 1   // the benchmark failed, or some systems did
	ExitUsage       = 2   // bad flags or arguments
	ExitInterrupted = 130 // Ctrl-C or SIGTERM, as a shell reports SIGINT
)

// Main is the body of a benchmark command's main function:
//
//	func main() { os.Exit(harness.Main("ingest", parseFlags, bench)) }
//
// It makes the standard logger print the time of day and name as a prefix,
// calls parse to read the command line (an error is logged and exits
// [ExitUsage]), then runs bench with a context that Ctrl-C or SIGTERM
// cancels, so that bench can stop its child processes in order. It returns
// the exit status: [ExitOK], [ExitFailed] with bench's error logged, or
// [ExitInterrupted] when the context was cancelled, whatever error bench
// returned then.
func Main[O any](name string, parse func() (O, error), bench func(ctx context.Context, o O) error) int {
	log.SetFlags(log.Ltime)
	log.SetPrefix(name + ": ")
	o, err := parse()
	if err != nil {
		log.Print(err)
		return ExitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := bench(ctx, o); err != nil {
		if ctx.Err() != nil {
			log.Printf("interrupted: %v", err)
			return ExitInterrupted
		}
		log.Printf("%v", err)
		return ExitFailed
	}
	return ExitOK
}

// ParseFlags parses args (os.Args[1:] in a command) into fs and rejects
// positional arguments, which no benchmark takes.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q; see -help", fs.Args())
	}
	return nil
}

// SystemFlags are the flags every side-by-side benchmark has: -only, the
// systems to run, and -short, a quick check with shorter defaults.
type SystemFlags[S Contender] struct {
	fs            *flag.FlagSet
	all           []S
	only          string
	short         bool
	shortDefaults []string // "name=value"
}

// DefineSystemFlags defines -only and -short on fs. -only defaults to all
// systems in the order of all. Under -short, each flag in shortDefaults
// ("name=value", as the command line would spell it) that the command line
// does not set takes that value, so that -short changes defaults only and
// never a value the operator asked for.
func DefineSystemFlags[S Contender](fs *flag.FlagSet, all []S, shortDefaults ...string) *SystemFlags[S] {
	f := &SystemFlags[S]{fs: fs, all: all, shortDefaults: shortDefaults}
	names := make([]string, len(all))
	for i, s := range all {
		names[i] = s.Base().Name
	}
	fs.StringVar(&f.only, "only", strings.Join(names, ","), "comma-separated systems to run, in this order")
	short := make([]string, len(shortDefaults))
	for i, d := range shortDefaults {
		short[i] = "-" + d
	}
	fs.BoolVar(&f.short, "short", false, "quick check: "+strings.Join(short, " ")+" unless those are given")
	return f
}

// Parse parses args with [ParseFlags], applies -short and returns the
// systems -only selects, in its order.
func (f *SystemFlags[S]) Parse(args []string) ([]S, error) {
	if err := ParseFlags(f.fs, args); err != nil {
		return nil, err
	}
	if f.short {
		given := map[string]bool{}
		f.fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
		for _, d := range f.shortDefaults {
			name, value, _ := strings.Cut(d, "=")
			if given[name] {
				continue
			}
			if err := f.fs.Set(name, value); err != nil {
				return nil, fmt.Errorf("-short: set -%s: %w", d, err)
			}
		}
	}
	return SelectSystems(f.only, f.all)
}

// Sleep waits for d, returning early with the context's cause if ctx ends.
func Sleep(ctx context.Context, d time.Duration) error {
	_, err := sleep(ctx, d, nil)
	return err
}

// sleep waits for d, or until ctx ends (returning its cause) or done is
// closed (returning false); a nil done is never closed.
func sleep(ctx context.Context, d time.Duration, done <-chan struct{}) (bool, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, context.Cause(ctx)
	case <-done:
		return false, nil
	case <-t.C:
		return true, nil
	}
}
