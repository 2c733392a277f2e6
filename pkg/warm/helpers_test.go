//go:build integration

package warm

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/example/memcached-operator/internal/testsupport/memcachedproc"
)

// memoryDir is a directory memcached (as nobody) can write its memory
// file in.
func memoryDir(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(memcachedproc.Binary); err != nil {
		t.Fatalf("memcached is not installed (make node-packages): %v", err)
	}
	return memcachedproc.WritableDir(t)
}

// start runs Run with memcached on a free port and the memory file in dir,
// and returns once memcached accepts connections.
func start(t *testing.T, dir string, args ...string) *running {
	t.Helper()
	return startWith(t, dir, "", args...)
}

// startWith is start with memcached's settings file.
func startWith(t *testing.T, dir, settingsFile string, args ...string) *running {
	t.Helper()
	addr, cmd := memcachedproc.CommandLine(t, host, args...)
	w := &running{addr: addr, stopCh: make(chan os.Signal, 1), done: make(chan int, 1), logs: &syncBuffer{}, out: &syncBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		code, err := Run(ctx, Config{
			Command:      cmd,
			Address:      addr,
			MemoryFile:   filepath.Join(dir, "memory"),
			SettingsFile: settingsFile,
			SettingsPoll: 100 * time.Millisecond,
			Stdout:       w.out,
			Stderr:       w.out,
			Log:          slog.New(slog.NewTextHandler(w.logs, nil)),
			Started: func(p *os.Process) {
				w.mu.Lock()
				w.proc = p
				w.mu.Unlock()
			},
		}, w.stopCh)
		if err != nil && ctx.Err() == nil {
			t.Errorf("Run: %v", err)
		}
		w.done <- code
	}()
	t.Cleanup(func() {
		cancel()
		if !w.exited() {
			<-w.done
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return w
		}
		if time.Now().After(deadline) {
			t.Fatalf("memcached does not accept connections: %v; it said:\n%s", err, w.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (w *running) process() *os.Process {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.proc
}

func (w *running) output() string { return w.out.String() + w.logs.String() }

// said tells whether the runner logs line within a second (it tells of a
// restore once memcached accepts connections, as the test sees too).
func (w *running) said(line string) bool {
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if strings.Contains(w.logs.String(), line) {
			return true
		}
	}
	return false
}

// stop sends the kubelet's SIGTERM and waits for Run's exit code.
func (w *running) stop(t *testing.T) int {
	t.Helper()
	w.stopCh <- syscall.SIGTERM
	return w.wait(t)
}

func (w *running) wait(t *testing.T) int {
	t.Helper()
	select {
	case w.code = <-w.done:
		close(w.done)
		return w.code
	case <-time.After(30 * time.Second):
		t.Fatalf("Run did not return; memcached said:\n%s", w.output())
		return 0
	}
}

// exited reports whether Run has returned (without waiting).
func (w *running) exited() bool {
	select {
	case code, ok := <-w.done:
		if ok {
			w.code = code
			close(w.done)
		}
		return true
	default:
		return false
	}
}

func fill(t *testing.T, addr string, n int) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "set key-%d 0 0 5\r\nvalue\r\n", i)
	}
	if _, err := c.Write(b.Bytes()); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	for i := range n {
		line, err := r.ReadString('\n')
		if err != nil || line != "STORED\r\n" {
			t.Fatalf("set %d: %q, %v", i, line, err)
		}
	}
}

// items is memcached's curr_items.
func items(t *testing.T, addr string) int {
	t.Helper()
	n, err := strconv.Atoi(stat(t, addr, "stats", "curr_items"))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// stat is name in what memcached answers command with ("stats", "stats
// settings"); "" when it says none.
func stat(t *testing.T, addr, command, name string) string {
	t.Helper()
	v, err := statOf(addr, command, name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func statOf(addr, command, name string) (string, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if _, err := c.Write([]byte(command + "\r\n")); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	v := ""
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return "", err
		}
		if line == "END\r\n" {
			return v, nil
		}
		if s, ok := strings.CutPrefix(strings.TrimSpace(line), "STAT "+name+" "); ok {
			v = s
		}
	}
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
