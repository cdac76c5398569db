// Package redistest provides Redis servers for tests of authd packages.
//
// [Addr] returns the shared server named by AUTHD_TEST_REDIS_ADDR; [Start]
// launches a private redis-server that a test may kill mid-test to exercise
// the fail-open paths; [StartCluster] launches a private three-node Redis
// Cluster whose nodes a test may kill one by one. All skip the test when
// their prerequisite is missing, and fail it instead when
// AUTHD_TEST_REQUIRE_BACKENDS=1 or CI=true, so CI can never skip silently.
package redistest

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// EnvAddr names the environment variable holding the address (host:port) of
// a Redis server that tests may use, for example "127.0.0.1:6379".
const EnvAddr = "AUTHD_TEST_REDIS_ADDR"

// Required reports whether missing test backends must fail tests rather than
// skip them: AUTHD_TEST_REQUIRE_BACKENDS=1 or CI=true.
func Required() bool {
	return os.Getenv("AUTHD_TEST_REQUIRE_BACKENDS") == "1" || os.Getenv("CI") == "true"
}

// skipOrFail skips t with msg, or fails it when backends are required.
func skipOrFail(t testing.TB, msg string) {
	t.Helper()
	if Required() {
		t.Fatalf("%s (required: AUTHD_TEST_REQUIRE_BACKENDS=1 or CI=true)", msg)
	}
	t.Skip(msg)
}

// Addr returns the value of AUTHD_TEST_REDIS_ADDR. If it is unset, Addr skips
// the test, naming the variable, or fails it when backends are required.
// Tests sharing this server must isolate their keys (for example with a
// unique key prefix) because they run in parallel.
func Addr(t testing.TB) string {
	t.Helper()
	addr := os.Getenv(EnvAddr)
	if addr == "" {
		skipOrFail(t, EnvAddr+" is not set; set it (e.g. 127.0.0.1:6379) to run the Redis tests")
	}
	return addr
}

// NewClient returns a client for addr with ContextTimeoutEnabled (so context
// deadlines bound socket I/O, as production wiring must), no retries and
// short dial/read/write timeouts. It is closed in t.Cleanup.
func NewClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialTimeout:           time.Second,
		ReadTimeout:           time.Second,
		WriteTimeout:          time.Second,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Start launches a private redis-server (from PATH) on a free 127.0.0.1 port
// without persistence, waits until it answers PING, and returns its address
// and a stop function. stop kills the server (SIGKILL, like a crash) and
// waits for it to exit; it is idempotent and also runs in t.Cleanup. If
// redis-server is not on PATH, Start skips the test (or fails it when
// backends are required).
func Start(t testing.TB) (addr string, stop func()) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		skipOrFail(t, "redis-server is not on PATH; install it to run tests that start their own Redis")
	}
	var lastErr error
	for range 3 { // a free port may be taken between probing and binding
		addr, stop, lastErr = start(t, bin)
		if lastErr == nil {
			t.Cleanup(stop)
			return addr, stop
		}
	}
	t.Fatalf("redistest: start redis-server: %v", lastErr)
	return "", nil
}

// start makes one attempt to launch redis-server.
func start(t testing.TB, bin string) (string, func(), error) {
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	return startOn(t, bin, port)
}

// startOn launches redis-server on port with extra arguments and waits
// until it answers PING.
func startOn(t testing.TB, bin string, port int, extra ...string) (string, func(), error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	var out bytes.Buffer
	cmd := exec.Command(bin, append([]string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", t.TempDir(),
	}, extra...)...)
	cmd.Stdout = &syncWriter{w: &out}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := ping(addr); err == nil {
			return addr, stop, nil
		}
		select {
		case <-exited:
			return "", nil, fmt.Errorf("redis-server exited early: %s", cmd.Stdout.(*syncWriter).String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("redis-server on %s did not answer PING within 5s", addr)
		}
	}
}

// freePort asks the kernel for a free TCP port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ping sends an inline PING and expects +PONG.
func ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// syncWriter collects the server's output for error messages.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}
