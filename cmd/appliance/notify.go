package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/notify"
	"github.com/aiserve/appliance/storage"
)

// newNotifier builds the notify stage: it routes the alerts of the rules
// (and those posted to /api/v2/alerts) to the receivers of the alerting
// section, with its outbox and state in the storage's bbolt file, and
// serves Alertmanager's v2 API.
func newNotifier(cfg *config.Config, db *storage.DB, logger *slog.Logger, reg prometheus.Registerer) (*notify.Notifier, error) {
	opts := notify.DefaultOptions()
	opts.DB = db.State()
	opts.Config = cfg.Alerting
	opts.ExternalURL = externalURL(cfg)
	opts.Logger = logger
	opts.Registerer = reg
	opts.Version = version
	n, err := notify.New(opts)
	if err != nil {
		return nil, fmt.Errorf("notify: %w", err)
	}
	return n, nil
}

// externalURL is web.external_url, or http://<host name>:<port> of the
// listen address, for the links in messages.
func externalURL(cfg *config.Config) string {
	if cfg.Web.ExternalURL != "" {
		return cfg.Web.ExternalURL
	}
	host, port, err := net.SplitHostPort(cfg.Web.ListenAddress)
	if err != nil {
		return ""
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		if h, err := os.Hostname(); err == nil {
			host = h
		} else {
			host = "localhost"
		}
	}
	scheme := "http"
	if cfg.Web.TLSServerConfig != nil {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// cmdNotify is `appliance notify test --receiver NAME [--config FILE]`: it
// sends a test message to every integration of the receiver, directly (not
// through the outbox, so it works next to a running appliance), and exits
// 1 if any did not accept it.
func cmdNotify(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "test" {
		fmt.Fprintln(stderr, "usage: appliance notify test --receiver NAME [--config FILE]")
		return 2
	}
	fs := flag.NewFlagSet("notify test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgFile := fs.String("config", "", "config file (default: the embedded default config)")
	receiver := fs.String("receiver", "", "the receiver to send a test message to (a name under alerting.receivers)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if *receiver == "" {
		fmt.Fprintln(stderr, "appliance notify test: --receiver is required")
		return 2
	}
	cfg, err := loadConfig(runFlags{config: *cfgFile})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := notify.TestReceiver(ctx, cfg.Alerting.Resolved(), *receiver, externalURL(cfg), nil, nil); err != nil {
		fmt.Fprintf(stderr, "appliance notify test: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "test message accepted by every integration of receiver %q\n", *receiver)
	return 0
}
