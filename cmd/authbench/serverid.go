package main

import (
	"bufio"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A benchmark must measure the server it started, not whatever else answers
// on the port (another engineer's authd, a stale run). verifyServer checks,
// through /proc (Linux), that every TCP socket listening where addr points
// belongs to process pid.

// verifyServer checks that the listener behind target (a URL or host:port
// on this machine) is a socket of process pid.
func verifyServer(pid int, target string) error {
	host, port, err := splitTarget(target)
	if err != nil {
		return err
	}
	ips, err := hostIPs(host)
	if err != nil {
		return err
	}
	where := net.JoinHostPort(host, strconv.Itoa(port))
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
		return fmt.Errorf("-server-pid %d: no such process (cannot check who serves %s)", pid, where)
	}
	inodes, err := listeningInodes(ips, port)
	if err != nil {
		return fmt.Errorf("cannot check who serves %s (Linux /proc/net/tcp needed): %w", where, err)
	}
	if len(inodes) == 0 {
		return fmt.Errorf("nothing listens on %s", where)
	}
	own, err := socketInodes(pid)
	if err != nil {
		return fmt.Errorf("cannot read the sockets of pid %d: %w", pid, err)
	}
	for _, ino := range inodes {
		if own[ino] {
			continue
		}
		if other, name := socketOwner(ino); other > 0 {
			return fmt.Errorf("%s is served by pid %d (%s), not by the server this run started (pid %d)", where, other, name, pid)
		}
		return fmt.Errorf("%s is served by another process (socket inode %d, not readable here), not by the server this run started (pid %d)", where, ino, pid)
	}
	return nil
}

// splitTarget returns the host and port of a URL or a host:port.
func splitTarget(target string) (string, int, error) {
	hostport := target
	defPort := ""
	if strings.Contains(target, "://") {
		u, err := url.Parse(target)
		if err != nil || u.Host == "" {
			return "", 0, fmt.Errorf("%q is not a URL", target)
		}
		hostport = u.Host
		defPort = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		if defPort == "" {
			return "", 0, fmt.Errorf("%q: %v", target, err)
		}
		host, p = strings.Trim(hostport, "[]"), defPort
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 || port > 65535 {
		return "", 0, fmt.Errorf("%q: bad port %q", target, p)
	}
	return host, port, nil
}

// hostIPs resolves host to the addresses a connection may go to.
func hostIPs(host string) ([]net.IP, error) {
	if ip := net.ParseIP(host); ip != nil {
		return []net.IP{ip}, nil
	}
	if host == "localhost" {
		return []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, nil
	}
	addrs, err := net.LookupIP(host)
	if err != nil {
		return nil, err
	}
	return addrs, nil
}

// listeningInodes returns the socket inodes of the TCP listeners on port
// that accept connections to one of ips: bound to it, or to a wildcard
// address.
func listeningInodes(ips []net.IP, port int) ([]uint64, error) {
	var out []uint64
	found := false
	for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		found = true
		socks, err := parseProcNetTCP(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for _, s := range socks {
			if !s.listen || s.port != port {
				continue
			}
			for _, ip := range ips {
				if s.ip.IsUnspecified() || s.ip.Equal(ip) {
					out = append(out, s.inode)
					break
				}
			}
		}
	}
	if !found {
		return nil, errors.New("/proc/net/tcp is not readable")
	}
	return out, nil
}

// procSocket is one line of /proc/net/tcp or /proc/net/tcp6.
type procSocket struct {
	ip     net.IP
	port   int
	listen bool
	inode  uint64
}

// parseProcNetTCP reads the table format of proc(5): "sl local_address
// rem_address st … inode", addresses as hex words in host byte order.
func parseProcNetTCP(r io.Reader) ([]procSocket, error) {
	var out []procSocket
	sc := bufio.NewScanner(r)
	first := true
	for sc.Scan() {
		if first {
			first = false
			continue // header
		}
		f := strings.Fields(sc.Text())
		if len(f) < 10 {
			continue
		}
		addr, p, ok := strings.Cut(f[1], ":")
		if !ok {
			return nil, fmt.Errorf("bad local address %q", f[1])
		}
		ip, err := procIP(addr)
		if err != nil {
			return nil, err
		}
		port, err := strconv.ParseUint(p, 16, 16)
		if err != nil {
			return nil, fmt.Errorf("bad port %q", p)
		}
		inode, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad inode %q", f[9])
		}
		out = append(out, procSocket{ip: ip, port: int(port), listen: f[3] == "0A", inode: inode})
	}
	return out, sc.Err()
}

// procIP decodes an address of /proc/net/tcp{,6}: 8 or 32 hex digits, each
// 32-bit word in host (little-endian on every Linux authd runs on) order.
func procIP(s string) (net.IP, error) {
	b, err := hex.DecodeString(s)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return nil, fmt.Errorf("bad address %q", s)
	}
	for i := 0; i < len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	return net.IP(b), nil
}

// socketInodes returns the inodes of the sockets pid has open.
func socketInodes(pid int) (map[uint64]bool, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[uint64]bool{}
	for _, e := range ents {
		link, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if v, ok := strings.CutPrefix(link, "socket:["); ok {
			if n, err := strconv.ParseUint(strings.TrimSuffix(v, "]"), 10, 64); err == nil {
				out[n] = true
			}
		}
	}
	return out, nil
}

// socketOwner finds a process (of those this user may inspect) holding the
// socket inode, and its command name; 0 if none is found.
func socketOwner(inode uint64) (int, string) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, ""
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if own, err := socketInodes(pid); err == nil && own[inode] {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			return pid, strings.TrimSpace(string(comm))
		}
	}
	return 0, ""
}

// cmdCheckServer is "authbench check-server -pid PID TARGET...": exit 0 if
// every target (URL or host:port) is served by PID. bench/run.sh runs it
// once its servers have started.
func cmdCheckServer(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("check-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pid := fs.Int("pid", 0, "process that must be the one listening")
	quiet := fs.Bool("q", false, "print nothing on success")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pid <= 0 || fs.NArg() == 0 {
		return usagef("usage: authbench check-server -pid PID URL|HOST:PORT...")
	}
	for _, t := range fs.Args() {
		if err := verifyServer(*pid, t); err != nil {
			return err
		}
		if !*quiet {
			fmt.Fprintf(stdout, "%s is served by pid %d\n", t, *pid)
		}
	}
	return nil
}

// cmdFreePort is "authbench free-port [-n N]": N distinct TCP ports free on
// 127.0.0.1 right now, one per line. Another process may still take one
// before the caller binds it: the load run's server check catches that.
func cmdFreePort(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("free-port", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 1, "how many ports")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 1 || *n > 64 {
		return usagef("-n: must be 1..64")
	}
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range *n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		lns = append(lns, ln)
	}
	for _, ln := range lns {
		fmt.Fprintln(stdout, ln.Addr().(*net.TCPAddr).Port)
	}
	return nil
}
