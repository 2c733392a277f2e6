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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/example/memcached-operator/internal/testsupport/memcachedproc"
)

// A stop saves the cache and the next memcached on the file restores every
// item, even with other threads and connections, and even when it starts
// in the second of the stop (which memcached alone refuses).
func TestAStopSavesTheCacheAndTheNextStartRestoresIt(t *testing.T) {
	dir := memoryDir(t)
	for i, settings := range [][]string{{"--threads=2"}, {"--threads=4", "--conn-limit=500"}, {"--threads=3"}, {"--threads=2"}} {
		w := start(t, dir, append([]string{"-m", "64"}, settings...)...)
		if i == 0 {
			fill(t, w.addr, 1000)
		}
		if got := items(t, w.addr); got != 1000 {
			t.Fatalf("start %d (%v): %d items, want 1000; memcached said:\n%s", i, settings, got, w.output())
		}
		// The count is memcached's, read once it serves.
		if said := w.said(`msg="memcached restored its cache from the memory file" items=1000`); said != (i > 0) {
			t.Errorf("start %d: restore reported: %v, want %v:\n%s", i, said, i > 0, w.logs.String())
		}
		if code := w.stop(t); code != 0 {
			t.Fatalf("start %d: exit code %d after a stop, want 0", i, code)
		}
		if _, err := os.Stat(filepath.Join(dir, "memory"+MetaSuffix)); err != nil {
			t.Fatalf("start %d: nothing saved on stop: %v", i, err)
		}
	}
}

// New settings in the settings file (as the kubelet writes a pod's
// annotation: a new file swapped in) restart memcached warm in the same
// runner, with no restart of its container: memcached takes them and keeps
// every item, and the runner says so with the settings it started on.
func TestNewSettingsRestartMemcachedWarmInTheSameContainer(t *testing.T) {
	dir := memoryDir(t)
	settings := filepath.Join(t.TempDir(), "settings")
	write := func(content string) { writeSettings(t, settings, content) }
	write("--threads=2\n")
	w := startWith(t, dir, settings, "-m", "64")
	fill(t, w.addr, 1000)
	if got := stat(t, w.addr, "stats settings", "num_threads"); got != "2" {
		t.Fatalf("num_threads %s, want 2 from the settings file", got)
	}
	first := w.process().Pid

	write("--threads=4\n--conn-limit=500\n\n")
	w.waitForSetting(t, "num_threads", "4")
	if got := stat(t, w.addr, "stats settings", "maxconns"); got != "500" {
		t.Errorf("maxconns %s, want 500", got)
	}
	if got := items(t, w.addr); got != 1000 {
		t.Fatalf("%d items after the settings changed, want 1000; it said:\n%s", got, w.output())
	}
	if w.process().Pid == first {
		t.Errorf("memcached was not restarted")
	}
	if !w.said(`msg="memcached restored its cache from the memory file" items=1000 settings="[--threads=4 --conn-limit=500]"`) {
		t.Errorf("the restart on the new settings was not reported:\n%s", w.logs.String())
	}
	// The same settings again (a file rewritten, not changed): no restart.
	second := w.process().Pid
	write("--threads=4\n--conn-limit=500\n")
	time.Sleep(500 * time.Millisecond)
	if w.process().Pid != second {
		t.Errorf("memcached restarted for settings that did not change")
	}
	if code := w.stop(t); code != 0 {
		t.Fatalf("exit code %d after a stop, want 0", code)
	}
}

// The settings file is a pod's annotation, which others than the operator
// can write: a flag the operator does not write (here a UDP port, last on
// the command line) never reaches memcached, at its start or in a change;
// the runner says what it refused.
func TestSettingsTheOperatorDoesNotWriteAreRefused(t *testing.T) {
	dir := memoryDir(t)
	settings := filepath.Join(t.TempDir(), "settings")
	writeSettings(t, settings, "--threads=2\n-U 11211\n")
	w := startWith(t, dir, settings, "-m", "64")
	if got := stat(t, w.addr, "stats settings", "num_threads"); got != "2" {
		t.Fatalf("num_threads %s, want 2 from the settings file", got)
	}
	if got := stat(t, w.addr, "stats settings", "udpport"); got != "0" {
		t.Errorf("udpport %s: a refused setting reached memcached", got)
	}
	writeSettings(t, settings, "--threads=3\n-o ssl_verify_mode=0\n")
	w.waitForSetting(t, "num_threads", "3")
	if got := stat(t, w.addr, "stats settings", "udpport"); got != "0" {
		t.Errorf("udpport %s after a change", got)
	}
	if !w.said(RefusedSettingsMessage) || !w.said("ssl_verify_mode") {
		t.Errorf("the refused settings were not told:\n%s", w.logs.String())
	}
	if code := w.stop(t); code != 0 {
		t.Fatalf("exit code %d after a stop, want 0", code)
	}
}

// A new maximum item size in the settings file restarts memcached in the
// same runner too, and it starts empty (memcached keeps no item across
// it), which the runner says with the settings.
func TestANewMaximumItemSizeRestartsMemcachedEmptyInTheSameContainer(t *testing.T) {
	dir := memoryDir(t)
	settings := filepath.Join(t.TempDir(), "settings")
	writeSettings(t, settings, "--max-item-size=1048576\n")
	w := startWith(t, dir, settings, "-m", "64")
	fill(t, w.addr, 100)
	writeSettings(t, settings, "--max-item-size=2097152\n")
	w.waitForSetting(t, "item_size_max", "2097152")
	if got := items(t, w.addr); got != 0 {
		t.Errorf("%d items after the maximum item size changed, want 0", got)
	}
	if !w.said(`msg="memcached started with an empty cache"`) || !w.said(`settings="[--max-item-size=2097152]"`) {
		t.Errorf("the empty start was not reported with its settings:\n%s", w.logs.String())
	}
	if code := w.stop(t); code != 0 {
		t.Fatalf("exit code %d after a stop, want 0", code)
	}
}

// writeSettings replaces the settings file with content as the kubelet
// does a downward API file: a new file renamed over it.
func writeSettings(t *testing.T, file, content string) {
	t.Helper()
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
}

// waitForSetting waits until memcached's stats settings say name is
// value (it refuses connections while it restarts).
func (w *running) waitForSetting(t *testing.T, name, value string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if v, _ := statOf(w.addr, "stats settings", name); v == value {
			return
		}
		if time.Now().After(deadline) || w.exited() {
			t.Fatalf("memcached did not take %s %s; it said:\n%s", name, value, w.output())
		}
	}
}

// A memory limit memcached cannot keep: it starts empty, and serves.
func TestAnotherMemoryLimitStartsEmpty(t *testing.T) {
	dir := memoryDir(t)
	w := start(t, dir, "-m", "64")
	fill(t, w.addr, 100)
	w.stop(t)
	w = start(t, dir, "-m", "128")
	if got := items(t, w.addr); got != 0 {
		t.Fatalf("%d items after the memory limit changed, want 0", got)
	}
	if !strings.Contains(w.logs.String(), "memcached started with an empty cache") {
		t.Errorf("the start was not reported empty:\n%s", w.logs.String())
	}
}

// A saved state memcached cannot read never keeps it from starting: empty,
// in the same container, with no restart by the kubelet. Memcached 1.6.18
// reads a .meta file's last line, cut short of its newline, on past its
// buffer to the next newline byte in its heap: mostly that aborts it
// (malloc(): invalid next size), and the runner starts it again empty; at
// times the bytes it reads fail its own checks and it starts empty itself.
// Every try must start empty and serve; tries go on until memcached has
// aborted once, which only the runner's second start survives.
func TestAnUnusableSavedStateStartsEmpty(t *testing.T) {
	const tries = 10
	for try := 1; try <= tries; try++ {
		dir := memoryDir(t)
		w := start(t, dir, "-m", "64")
		fill(t, w.addr, 100)
		w.stop(t)
		meta := filepath.Join(dir, "memory"+MetaSuffix)
		saved, err := os.ReadFile(meta)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(meta, saved[:100], 0o600); err != nil {
			t.Fatal(err)
		}
		w = start(t, dir, "-m", "64")
		if got := items(t, w.addr); got != 0 {
			t.Fatalf("try %d: %d items from a truncated save, want 0", try, got)
		}
		if w.exited() {
			t.Fatalf("try %d: Run returned; memcached said:\n%s", try, w.output())
		}
		if !w.said(`msg="memcached started with an empty cache"`) {
			t.Fatalf("try %d: the empty start was not reported:\n%s", try, w.logs.String())
		}
		aborted := strings.Contains(w.logs.String(), "memcached failed while restoring its memory file; starting it empty")
		w.stop(t)
		if aborted {
			t.Logf("memcached aborted on the truncated save at try %d and was started again empty", try)
			return
		}
		t.Logf("try %d: memcached found the truncated save invalid itself:\n%s", try, w.logs.String())
	}
	t.Fatalf("memcached did not abort on a truncated save in %d tries: the runner's second start went untested", tries)
}

// A memcached killed (a crash, the OOM killer) saved nothing: Run returns
// its code, and the next start is empty.
func TestAKilledMemcachedComesBackEmpty(t *testing.T) {
	dir := memoryDir(t)
	w := start(t, dir, "-m", "64")
	fill(t, w.addr, 100)
	w.process().Signal(syscall.SIGKILL)
	if code := w.wait(t); code != 128+int(syscall.SIGKILL) {
		t.Fatalf("exit code %d, want %d", code, 128+int(syscall.SIGKILL))
	}
	w = start(t, dir, "-m", "64")
	if got := items(t, w.addr); got != 0 {
		t.Fatalf("%d items after a kill, want 0", got)
	}
}

type running struct {
	addr   string
	stopCh chan os.Signal
	done   chan int
	code   int
	logs   *syncBuffer
	out    *syncBuffer
	mu     sync.Mutex
	proc   *os.Process
}

// host is the loopback address the tests' memcacheds listen on: one of
// their own, so that the runner, which dials memcached's port until it
// answers, never reaches another test process's server on a port it
// reused.
const host = "127.0.0.78"

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
			Command:       cmd,
			Address:       addr,
			MemoryFile:    filepath.Join(dir, "memory"),
			SettingsFile:  settingsFile,
			SettingsPoll:  100 * time.Millisecond,
			RestoreWindow: 10 * time.Second,
			Stdout:        w.out,
			Stderr:        w.out,
			Log:           slog.New(slog.NewTextHandler(w.logs, nil)),
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

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
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

// memcached failing at start: its exit code is the runner's, and the end
// of what it said is the container's termination message (which the
// status quotes), not the runner's own lines.
func TestAFailureLeavesMemcachedsWordsAsTheTerminationMessage(t *testing.T) {
	dir := memoryDir(t)
	termination := filepath.Join(t.TempDir(), "termination-log")
	var logs syncBuffer
	code, err := Run(context.Background(), Config{
		// A port below 1024, which nobody may not listen on.
		Command:        []string{memcachedproc.Binary, "--port=80", "--udp-port=0", "-l", host, "-u", "nobody"},
		MemoryFile:     filepath.Join(dir, "memory"),
		RestoreWindow:  10 * time.Second,
		Stdout:         &logs,
		Stderr:         &logs,
		Log:            slog.New(slog.NewTextHandler(&logs, nil)),
		TerminationLog: termination,
	}, make(chan os.Signal))
	if err != nil {
		t.Fatal(err)
	}
	if code != 71 {
		t.Errorf("exit code %d, want memcached's 71; it said:\n%s", code, logs.String())
	}
	msg, err := os.ReadFile(termination)
	if err != nil {
		t.Fatal(err)
	}
	last := strings.TrimSpace(string(msg))
	if i := strings.LastIndex(last, "\n"); i >= 0 {
		last = last[i+1:]
	}
	if !strings.HasPrefix(last, "failed to listen on") || strings.Contains(string(msg), "msg=") {
		t.Errorf("termination message ends with %q, want memcached's words", last)
	}
}
