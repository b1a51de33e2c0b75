package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/prometheus/notifier"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/notify"
	"github.com/aiserve/appliance/ui"
)

// The notify part routes the alerts of the rules part (and those posted to
// /api/v2/alerts) to the receivers of the alerting section, and serves
// Alertmanager's v2 API. It is built before the rules part (rank 10 < 20)
// so that the rules can take it as their notifier through alertSink.
func init() {
	partBuilders = append(partBuilders, partBuilder{rank: 10, build: buildNotify})
}

type notifyPart struct {
	n *notify.Notifier
}

// notifiers holds the notifier of each appliance (there is one, but the
// appliance struct is not this file's to extend).
var notifiers sync.Map // *appliance → *notify.Notifier

// alertSink returns what the rules part hands its alerts to: the notifier,
// or nil when the notify part was not built.
func (a *appliance) alertSink() interface {
	Send(alerts ...*notifier.Alert)
} {
	if n, ok := notifiers.Load(a); ok {
		return n.(*notify.Notifier)
	}
	return nil
}

func buildNotify(a *appliance, cfg *config.Config) (part, error) {
	opts := notify.DefaultOptions()
	opts.DB = a.db.State()
	opts.Config = cfg.Alerting
	opts.ExternalURL = externalURL(cfg)
	opts.Logger = a.logger.With("component", "notify")
	opts.Registerer = a.reg
	opts.Version = version
	n, err := notify.New(opts)
	if err != nil {
		return nil, fmt.Errorf("notify: %w", err)
	}
	notifiers.Store(a, n)
	a.uiExtra = append(a.uiExtra, func(o *ui.Options) {
		if o.Handlers == nil {
			o.Handlers = map[string]http.Handler{}
		}
		o.Handlers["/api/v2/"] = n.Handler()
	})
	return &notifyPart{n: n}, nil
}

func (p *notifyPart) name() string                         { return "notify" }
func (p *notifyPart) run(ctx context.Context) error        { return p.n.Run(ctx) }
func (p *notifyPart) applyConfig(cfg *config.Config) error { return p.n.ApplyConfig(cfg.Alerting) }

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
