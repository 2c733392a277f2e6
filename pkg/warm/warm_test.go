//go:build integration

package warm

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/example/memcached-operator/internal/testsupport/memcachedproc"
	"github.com/example/memcached-operator/pkg/podlog"
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
	// The runner's word, which the operator reads: empty, not restored.
	if !w.said(podlog.EmptyMessage) {
		t.Errorf("the start after a kill was not reported empty:\n%s", w.logs.String())
	}
	if strings.Contains(w.logs.String(), podlog.RestoredMessage) {
		t.Errorf("the start after a kill was reported restored:\n%s", w.logs.String())
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

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
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
