// Package memcachedproc runs memcached itself for tests (Debian's package,
// which the real node's image is made of; make node-packages installs it):
// what memcached does is memcached's behaviour, not a fake's.
package memcachedproc

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Binary is memcached's path.
const Binary = "/usr/bin/memcached"

// Process is a memcached the test started.
type Process struct {
	// Addr is its host:port on the loopback.
	Addr string
	Cmd  *exec.Cmd
}

// Start runs memcached with args on a free port of 127.0.0.1, as nobody
// (it refuses to run as root), until the test ends, and returns once it
// accepts connections.
func Start(t testing.TB, args ...string) *Process {
	t.Helper()
	return StartOn(t, "127.0.0.1", args...)
}

// StartOn is Start on another loopback address than 127.0.0.1 (any of
// 127.0.0.0/8 on Linux): a memcached no other test's process can reach by a
// port it reused.
func StartOn(t testing.TB, host string, args ...string) *Process {
	t.Helper()
	addr, line := CommandLine(t, host, args...)
	return run(t, addr, line)
}

// StartAt is Start on port of host: memcached's default port (11211) on an
// address of the loopback, say, where clients hash a server by its host
// alone.
func StartAt(t testing.TB, host string, port int, args ...string) *Process {
	t.Helper()
	return run(t, net.JoinHostPort(host, strconv.Itoa(port)), commandLine(host, strconv.Itoa(port), args))
}

// run runs memcached's command line and waits for it to listen on addr.
func run(t testing.TB, addr string, line []string) *Process {
	t.Helper()
	if _, err := os.Stat(Binary); err != nil {
		t.Fatalf("memcached is not installed (make node-packages): %v", err)
	}
	cmd := exec.Command(line[0], line[1:]...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("memcached did not listen on %s", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return &Process{Addr: addr, Cmd: cmd}
}

// CommandLine is memcached's command line with args, on a free port of
// host, as nobody (it refuses to run as root), and the address it will
// listen on: for a test that starts memcached by other means than Start.
func CommandLine(t testing.TB, host string, args ...string) (string, []string) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	l.Close()
	return addr, commandLine(host, port, args)
}

// commandLine is memcached's command line on host:port, as nobody.
func commandLine(host, port string, args []string) []string {
	return append([]string{Binary, "--port=" + port, "--udp-port=0", "-l", host, "-u", "nobody"}, args...)
}

// FilesDir is a new directory memcached's user (nobody) can read, for the
// files memcached is started with.
func FilesDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// WritableDir is a directory of the test that memcached, running as
// nobody, can create files in (a memory file, say).
func WritableDir(t testing.TB) string {
	t.Helper()
	dir := FilesDir(t)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}
