package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
)

// otherProcess starts a process that exists but listens nowhere.
func otherProcess(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start sleep: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process.Pid
}

// TestVerifyServer: the listener of this test process is ours, not another
// process's; a closed port is served by nobody.
func TestVerifyServer(t *testing.T) {
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skip("no /proc/net/tcp (not Linux)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	for _, target := range []string{addr, "http://" + addr, "http://" + addr + "/metrics", "http://localhost:" + strings.Split(addr, ":")[1]} {
		if err := verifyServer(os.Getpid(), target); err != nil {
			t.Errorf("own listener %s: %v", target, err)
		}
	}

	other := otherProcess(t)
	err = verifyServer(other, "http://"+addr)
	if err == nil {
		t.Fatalf("pid %d (sleep) accepted as the server on %s", other, addr)
	}
	want := fmt.Sprintf("%s is served by pid %d (", addr, os.Getpid())
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fmt.Sprintf("not by the server this run started (pid %d)", other)) {
		t.Errorf("wrong pid: %v; want it to name both pids (%q)", err, want)
	}

	// A load run with the wrong -server-pid stops before sending anything.
	var hits atomic.Int64
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1); fixedTokenHandler(w, r) })}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	var stderr bytes.Buffer
	err = run(context.Background(), []string{"-mode", "ceiling-http", "-target", "http://" + addr, "-server-pid", fmt.Sprint(other), "-n", "10", "-q"}, io.Discard, &stderr)
	if err == nil || !strings.Contains(err.Error(), "not by the server this run started") {
		t.Errorf("load run with the wrong -server-pid: %v", err)
	}
	if hits.Load() != 0 {
		t.Errorf("%d requests sent to a server that is not -server-pid", hits.Load())
	}
	if err := run(context.Background(), []string{"-mode", "ceiling-http", "-target", "http://" + addr, "-server-pid", fmt.Sprint(os.Getpid()), "-n", "10", "-q"}, io.Discard, io.Discard); err != nil {
		t.Errorf("load run with the right -server-pid: %v", err)
	}
	if err := run(context.Background(), []string{"check-server", "-q", "-pid", fmt.Sprint(os.Getpid()), addr}, io.Discard, io.Discard); err != nil {
		t.Errorf("check-server: %v", err)
	}

	// Nothing listens on a port just closed.
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln2.Addr().String()
	ln2.Close()
	if err := verifyServer(os.Getpid(), closed); err == nil || !strings.Contains(err.Error(), "nothing listens on "+closed) {
		t.Errorf("closed port: %v", err)
	}
}

func TestParseProcNetTCP(t *testing.T) {
	const table = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 4343 1 0000000000000000 20 4 30 10 -1
`
	socks, err := parseProcNetTCP(strings.NewReader(table))
	if err != nil {
		t.Fatal(err)
	}
	if len(socks) != 2 || !socks[0].listen || socks[1].listen || socks[0].port != 8080 || socks[0].inode != 4242 || !socks[0].ip.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("parsed %+v", socks)
	}
	const table6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1F91 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 77 1 0000000000000000 100 0 0 10 0
`
	socks, err = parseProcNetTCP(strings.NewReader(table6))
	if err != nil || len(socks) != 1 || !socks[0].ip.Equal(net.IPv6loopback) || socks[0].port != 8081 {
		t.Errorf("tcp6: %+v %v", socks, err)
	}
}

func TestFreePort(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"free-port", "-n", "3"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	ports := strings.Fields(out.String())
	if len(ports) != 3 || ports[0] == ports[1] || ports[1] == ports[2] || ports[0] == ports[2] {
		t.Fatalf("free-port -n 3: %q", out.String())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+ports[0])
	if err != nil {
		t.Fatalf("port %s not free: %v", ports[0], err)
	}
	ln.Close()
}
