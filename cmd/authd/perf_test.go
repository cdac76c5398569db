package main

import (
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"
)

func TestPerfConfigValidate(t *testing.T) {
	for _, c := range []struct {
		p  perfConfig
		ok bool
	}{
		{perfConfig{}, true},
		{perfConfig{ClientCacheTTL: 2 * time.Second, Addr: "127.0.0.1:0"}, true},
		{perfConfig{Addr: "[::1]:6060"}, true},
		{perfConfig{Addr: "0.0.0.0:6060"}, false},
		{perfConfig{Addr: "localhost:6060"}, false},
		{perfConfig{Addr: "10.0.0.1:6060"}, false},
		{perfConfig{Addr: "127.0.0.1"}, false},
		{perfConfig{ClientCacheTTL: -time.Second}, false},
		{perfConfig{ClientCacheTTL: time.Hour}, false},
	} {
		err := c.p.validate()
		if (err == nil) != c.ok {
			t.Errorf("%+v: err = %v, want ok=%v", c.p, err, c.ok)
		}
		if err != nil {
			if _, isUsage := err.(usageError); !isUsage {
				t.Errorf("%+v: %v is not a usage error (exit 2)", c.p, err)
			}
		}
	}
	if n := defaultPoolMaxConns(); n < 8 {
		t.Errorf("defaultPoolMaxConns() = %d, want at least 8", n)
	}
}

func TestPprofListener(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	stop, err := startPprof(perfConfig{}, log)
	if err != nil {
		t.Fatal(err)
	}
	stop() // disabled: nothing to stop

	// An ephemeral loopback port starts and stops cleanly.
	p := perfConfig{Addr: "127.0.0.1:0"}
	stop, err = startPprof(p, log)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if _, err := startPprof(perfConfig{Addr: "0.0.0.0:0"}, log); err == nil {
		t.Fatal("pprof started on a non-loopback address")
	}
}

func TestPprofServes(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	const addr = "127.0.0.1:16161"
	stop, err := startPprof(perfConfig{Addr: addr}, log)
	if err != nil {
		t.Skipf("port busy: %v", err)
	}
	defer stop()
	resp, err := http.Get("http://" + addr + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/debug/pprof/cmdline: %d", resp.StatusCode)
	}
}
