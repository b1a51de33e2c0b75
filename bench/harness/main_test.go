package harness

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// helperEnv makes the test binary, started as a child process, act as a
// system under test instead of running the tests (see helperServer).
const helperEnv = "HARNESS_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperServer(mode, os.Args[len(os.Args)-1]))
	}
	goleak.VerifyTestMain(m)
}

// helperServer listens on addr and serves /-/ready and a /metrics page
// until SIGTERM, then exits 0. In mode "exit" it exits 3 at once instead.
func helperServer(mode, addr string) int {
	if mode == "exit" {
		return 3
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) {})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "# TYPE helper_samples_total counter\nhelper_samples_total{a=\"1\"} 2\nhelper_samples_total{a=\"2\"} 3\n")
	})
	go http.Serve(ln, mux)
	<-term
	fmt.Println("stopping on SIGTERM")
	return 0
}

// helperSystem is a System whose binary is this test binary in helper mode.
func helperSystem(t *testing.T, mode string) (System, string) {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(helperEnv, mode) // the child inherits it
	return System{
		Name:      "helper",
		Title:     "helper " + mode,
		Args:      func(_, _, addr string) []string { return []string{addr} },
		ReadyPath: "/-/ready",
	}, bin
}

// testClient keeps no idle connections, which goleak would report.
func testClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
}
