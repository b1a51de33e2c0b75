package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/ui"
)

// runFlags are the flags shared by run and demo.
type runFlags struct {
	config    string
	data      string
	listen    string
	logLevel  string
	logFormat string
	// startFresh accepts a missing or empty state.db next to existing
	// series data (storage.Options.StartFresh).
	startFresh bool
	// gogc is the garbage collector's target percentage; gogcUnset
	// (the default) takes $GOGC when set and defaultGOGC otherwise.
	gogc int
}

// defaultGOGC is the garbage collector's target the appliance runs with
// unless $GOGC or --gogc says otherwise. Go's default, 100, lets the heap
// grow to twice what is live; most of what the appliance allocates is
// short-lived (scrape pages, VictoriaMetrics' row buffers, query results),
// so a lower target trades a little CPU for much less peak memory.
// VictoriaMetrics runs with 30; bench/ingest -small-box measured the choice
// (README, "Performance").
const defaultGOGC = 50

// gogcUnset is --gogc's default: not given.
const gogcUnset = -2

// applyGOGC sets the garbage collector's target from --gogc, else from
// $GOGC (which the runtime has applied already), else defaultGOGC, and
// returns the value in force (-1: off).
func applyGOGC(flagValue int, env string) int {
	switch {
	case flagValue != gogcUnset:
		debug.SetGCPercent(flagValue)
		return flagValue
	case env != "":
		v := debug.SetGCPercent(-1)
		debug.SetGCPercent(v)
		return v
	}
	debug.SetGCPercent(defaultGOGC)
	return defaultGOGC
}

func (f *runFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.config, "config", "", "config file (default: the embedded default config)")
	fs.StringVar(&f.data, "data", "", "data directory (overrides storage.path; default \"data\")")
	fs.StringVar(&f.listen, "listen", "", "HTTP listen address (overrides web.listen_address; default \":9090\")")
	fs.StringVar(&f.logLevel, "log.level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&f.logFormat, "log.format", "text", "log format: text (logfmt: key=value pairs) or json; Prometheus' logfmt is accepted for text")
	fs.IntVar(&f.gogc, "gogc", gogcUnset, fmt.Sprintf("garbage collector target percentage (Go's GOGC; -1 switches the collector off); default $GOGC, else %d", defaultGOGC))
	fs.BoolVar(&f.startFresh, "storage.start-fresh", false, "start with an empty state.db (alert state, silences, notification log) when it is missing or empty next to existing series data; without it such a start is refused")
	addPrometheusAliases(fs)
}

func (f *runFlags) flagMap() map[string]string {
	return map[string]string{"config": f.config, "data": f.data, "listen": f.listen, "log.level": f.logLevel, "log.format": f.logFormat, "storage.start-fresh": strconv.FormatBool(f.startFresh), "gogc": strconv.Itoa(f.gogc)}
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log.level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text", "logfmt":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log.format %q: want text, logfmt or json", format)
}

func cmdRun(args []string, _, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f runFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger, err := newLogger(stderr, f.logLevel, f.logFormat)
	if err != nil {
		fmt.Fprintln(stderr, "appliance run:", err)
		return 2
	}
	cfg, err := loadConfig(f)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	for _, w := range cfg.Warnings() {
		// What the file has that the appliance maps or ignores.
		logger.Warn("config note", "note", strings.TrimPrefix(w.Msg, "warning: "), "file", w.File, "line", w.Line)
	}
	f.gogc = applyGOGC(f.gogc, os.Getenv("GOGC"))
	app, err := newAppliance(cfg, f, logger)
	if err != nil {
		logger.Error("cannot start", "err", err)
		return 1
	}
	if err := app.run(); err != nil {
		logger.Error("stopped with an error", "err", err)
		return 1
	}
	return 0
}

// loadConfig reads the config file, or builds the embedded default when
// there is none, checks what the stages check, and applies the flags that
// override it.
func loadConfig(f runFlags) (*config.Config, error) {
	var cfg *config.Config
	if f.config == "" {
		listen := f.listen
		if listen == "" {
			listen = ":9090"
		}
		cfg = config.Default(listen)
	} else {
		c, err := config.LoadFile(f.config)
		if err != nil {
			return nil, err
		}
		cfg = c
	}
	// What config leaves to the stages (rule pack names, templates), with
	// the same file:line errors as `appliance check`.
	if err := validate(cfg); err != nil {
		return nil, err
	}
	if f.data != "" {
		cfg.Storage.Path = f.data
	}
	if f.listen != "" {
		cfg.Web.ListenAddress = f.listen
	}
	if cfg.Storage.Path == "" {
		cfg.Storage.Path = "data"
	}
	if cfg.Web.ListenAddress == "" {
		cfg.Web.ListenAddress = ":9090"
	}
	return cfg, nil
}

func restartOnly(old, cfg *config.Config) []string {
	var keys []string
	if old.Storage.Path != cfg.Storage.Path || old.Storage.Retention != cfg.Storage.Retention || old.Storage.MemoryBudget != cfg.Storage.MemoryBudget || old.Storage.MinFreeDisk != cfg.Storage.MinFreeDisk {
		keys = append(keys, "storage")
	}
	// The users and the TLS files apply at once (webSettings); the rest
	// of web binds the listener and the server.
	ow, nw := old.Web, cfg.Web
	if ow.ListenAddress != nw.ListenAddress || ow.MaxRequestBodyBytes != nw.MaxRequestBodyBytes ||
		ow.MaxConnections != nw.MaxConnections || ow.ReadTimeout != nw.ReadTimeout ||
		ow.WriteTimeout != nw.WriteTimeout || ow.IdleTimeout != nw.IdleTimeout {
		keys = append(keys, "web")
	}
	if old.Query != cfg.Query {
		keys = append(keys, "query")
	}
	return keys
}

// webSettings are the web settings a reload applies at once.
func webSettings(w config.WebConfig) (ui.WebSettings, error) {
	tlsCfg, err := serverTLS(w.TLSServerConfig)
	if err != nil {
		return ui.WebSettings{}, err
	}
	users := map[string]string{}
	for u, h := range w.BasicAuthUsers {
		users[u] = string(h)
	}
	ws := ui.WebSettings{BasicAuthUsers: users, TLS: tlsCfg}
	if c := w.TLSServerConfig; c != nil {
		ws.CertFile, ws.KeyFile = c.CertFile, c.KeyFile
	}
	return ws, nil
}

// webWriteTimeout is web.write_timeout, or query.timeout plus a minute
// when it is left 0, so that no query the engine allows is cut off.
func webWriteTimeout(cfg *config.Config, queryTimeout time.Duration) time.Duration {
	if d := time.Duration(cfg.Web.WriteTimeout); d > 0 {
		return d
	}
	return queryTimeout + time.Minute
}

// serverTLS builds the HTTPS settings, or nil for plain HTTP.
func serverTLS(c *config.TLSServerConfig) (*tls.Config, error) {
	if c == nil {
		return nil, nil
	}
	t, err := c.TLSConfig()
	if err != nil {
		return nil, fmt.Errorf("web.tls_server_config: %w", err)
	}
	return t, nil
}
