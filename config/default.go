package config

import (
	"bytes"
	_ "embed"
	"net"
	"text/template"
)

//go:embed default.yml
var defaultYAML string

var defaultTemplate = template.Must(template.New("default.yml").Parse(defaultYAML))

// Default returns the embedded default configuration for an appliance
// listening on listenAddress (as the --listen flag; "" means ":9090"). It
// scrapes the appliance's own /metrics. Relative paths in it resolve
// against the working directory.
func Default(listenAddress string) *Config {
	if listenAddress == "" {
		listenAddress = DefaultWebConfig.ListenAddress
	}
	var buf bytes.Buffer
	err := defaultTemplate.Execute(&buf, struct{ ListenAddress, SelfTarget string }{
		ListenAddress: listenAddress,
		SelfTarget:    selfTarget(listenAddress),
	})
	if err == nil {
		var cfg *Config
		if cfg, err = Load(buf.Bytes(), ""); err == nil {
			return cfg
		}
	}
	// Only a listen address that is no host:port gets here (the values
	// are quoted into the template); run without the self-scrape job
	// rather than fail, and let the web server report the address.
	cfg := defaults()
	cfg.Web.ListenAddress = listenAddress
	return cfg
}

// selfTarget turns a listen address into an address to scrape: an empty or
// unspecified host (":9090", "0.0.0.0:9090", "[::]:9090") becomes localhost.
func selfTarget(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}
