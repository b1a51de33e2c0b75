package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/demo"
)

// cmdDemo starts a simulated vLLM fleet on localhost and the appliance
// scraping, probing and alerting on it (demo.ShowcaseConfig), so a
// newcomer sees real-looking data within a minute and an alert within
// minutes of POST /demo/control {"slow": 3}.
func cmdDemo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f runFlags
	f.register(fs)
	instances := fs.Int("instances", 3, "simulated vLLM instances")
	basePort := fs.Int("base-port", 8000, "first instance's port (vLLM's default); 0 picks free ports")
	seed := fs.Int64("seed", 1, "simulation seed")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if f.config != "" {
		fmt.Fprintln(stderr, "appliance demo: --config is not used; the demo writes its own")
		return 2
	}
	logger, err := newLogger(stderr, f.logLevel, f.logFormat)
	if err != nil {
		fmt.Fprintln(stderr, "appliance demo:", err)
		return 2
	}

	fopts := demo.DefaultFleetOptions()
	fopts.Instances = *instances
	fopts.BasePort = *basePort
	fopts.Seed = *seed
	fleet, err := demo.NewFleet(fopts)
	if err != nil {
		fmt.Fprintln(stderr, "appliance demo:", err)
		return 1
	}
	demo.SetShowcaseDelays(fleet)
	sidecar, err := demo.NewSidecar(demo.SidecarOptions{Addr: "127.0.0.1:0", Fleet: fleet, Logger: logger.With("component", "demo")})
	if err != nil {
		fleet.Close()
		fmt.Fprintln(stderr, "appliance demo:", err)
		return 1
	}
	rulesDir, err := os.MkdirTemp("", "appliance-demo-rules-")
	if err != nil {
		fmt.Fprintln(stderr, "appliance demo:", err)
		return 1
	}
	defer os.RemoveAll(rulesDir)
	rulesFile, err := demo.WriteShowcaseRules(rulesDir)
	if err != nil {
		fmt.Fprintln(stderr, "appliance demo:", err)
		return 1
	}

	if f.data == "" {
		dir, err := os.MkdirTemp("", "appliance-demo-")
		if err != nil {
			fmt.Fprintln(stderr, "appliance demo:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		f.data = dir
	}
	listen := f.listen
	if listen == "" {
		listen = ":9090"
	}
	// --listen 127.0.0.1:0 picks a free port (the demo scrapes itself).
	if listen, err = demo.FreeListen(listen); err != nil {
		fmt.Fprintln(stderr, "appliance demo:", err)
		return 2
	}
	f.listen = listen
	cfg, err := config.Load([]byte(demo.ShowcaseConfig(demo.ShowcaseOptions{
		Listen: listen, Fleet: fleet, Sidecar: sidecar, RulesFile: rulesFile,
	})), "demo.yml")
	if err != nil {
		fmt.Fprintln(stderr, "appliance demo: generated config:", err)
		return 1
	}
	cfg.Storage.Path = f.data
	cfg.Web.ListenAddress = listen
	f.gogc = applyGOGC(f.gogc, os.Getenv("GOGC"))
	app, err := newAppliance(cfg, f, logger)
	if err != nil {
		logger.Error("cannot start", "err", err)
		return 1
	}
	app.extra = append(app.extra, actor{name: "demo fleet", run: fleet.Run}, actor{name: "demo sidecar", run: sidecar.Run})
	fmt.Fprintf(stdout, "demo: %d simulated vLLM instances at %s\n", len(fleet.Targets()), strings.Join(fleet.Targets(), ", "))
	fmt.Fprintf(stdout, "demo: simulated GPU at http://%s/metrics, alerts logged by %s\n", sidecar.Addr(), sidecar.ReceiverURL())
	fmt.Fprintf(stdout, "demo: appliance on http://%s  (try /api/v1/query?query=up)\n", localURLHost(listen))
	fmt.Fprintf(stdout, "demo: slow an instance down: curl -d '{\"slow\": 3}' http://%s/demo/control\n", fleet.Targets()[0])
	if err := app.run(); err != nil {
		logger.Error("stopped with an error", "err", err)
		return 1
	}
	return 0
}

// localURLHost turns a listen address such as ":9090" into "localhost:9090".
func localURLHost(listen string) string {
	if strings.HasPrefix(listen, ":") {
		return "localhost" + listen
	}
	return listen
}
