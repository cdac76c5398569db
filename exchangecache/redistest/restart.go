package redistest

import (
	"net"
	"os/exec"
	"strconv"
	"testing"
)

// Restart starts a private redis-server again on the address a server from
// [Start] had (after its stop), empty, as a Redis that came back after a
// crash would be. It returns the new server's stop function.
func Restart(t testing.TB, addr string) (stop func()) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		skipOrFail(t, "redis-server is not on PATH; install it to run tests that start their own Redis")
	}
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("redistest: restart %q: %v", addr, err)
	}
	port, _ := strconv.Atoi(p)
	_, stop, err = startOn(t, bin, port)
	if err != nil {
		t.Fatalf("redistest: restart redis-server on %s: %v", addr, err)
	}
	t.Cleanup(stop)
	return stop
}
