package warm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/example/memcached-operator/pkg/podlog"
)

// ran is how one memcached run ended.
type ran struct {
	// code is memcached's exit code (128 plus the signal's number when a
	// signal ended it).
	code int
	// stopped: it was asked to stop.
	stopped bool
	// settingsChanged: it saved and exited to take new settings.
	settingsChanged bool
	// outcome is what it said of its memory file.
	outcome Outcome
	// tail is the end of its standard error.
	tail []byte
}

// runOnce runs memcached once with settings added to its command line,
// until it exits.
func runOnce(ctx context.Context, c Config, settings []string, restoring bool, stop <-chan os.Signal) (ran, error) {
	args := slices.Concat(c.Command[1:], settings, []string{"--memory-file=" + c.MemoryFile})
	cmd := exec.Command(c.Command[0], args...)
	cmd.Stdout = c.Stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return ran{outcome: Unknown}, err
	}
	w := &startWatch{c: c, outcome: Unknown, read: make(chan struct{}), serving: make(chan struct{}),
		done: make(chan struct{}), tail: &tailWriter{max: podlog.OutputLimit}}
	// The settings are reported only where the runner takes them.
	if c.SettingsFile != "" {
		w.reported = settings
		c.Log.Info("Starting memcached", "memoryFile", c.MemoryFile, "settings", settings)
	} else {
		c.Log.Info("Starting memcached", "memoryFile", c.MemoryFile)
	}
	if err := cmd.Start(); err != nil {
		return ran{code: CannotStartExitCode, outcome: Unknown}, fmt.Errorf("starting memcached: %w", err)
	}
	if c.Started != nil {
		c.Started(cmd.Process)
	}
	defer close(w.done)
	go w.readOutput(stderr)
	go w.awaitServing(ctx, restoring)
	changed := make(chan []string, 1)
	if c.SettingsFile != "" {
		// Only once memcached serves: before it has restored, SIGUSR1
		// would end it without saving.
		go watchSettings(c, settings, w.serving, w.done, changed)
	}
	exited := make(chan error, 1)
	go func() {
		<-w.read // Wait closes the pipe: read it all first.
		exited <- cmd.Wait()
	}()
	return w.supervise(ctx, cmd, settings, stop, changed, exited)
}

// startWatch follows one run of memcached: what it said of its memory
// file (outcome), whether it serves, and the end of its standard error.
type startWatch struct {
	c        Config
	reported []string // the settings its reports name (nil: none)

	mu      sync.Mutex
	outcome Outcome
	read    chan struct{} // closed once its standard error is read to the end
	serving chan struct{} // closed once it accepts connections
	done    chan struct{} // closed once runOnce returns
	tail    *tailWriter
}

// readOutput copies memcached's standard error, and reports an empty
// start as soon as memcached says so.
func (w *startWatch) readOutput(stderr io.Reader) {
	defer close(w.read)
	watchOutput(stderr, io.MultiWriter(w.c.Stderr, w.tail), func(line string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.outcome == Unknown {
			w.outcome = Empty
			podlog.Write(w.c.Log, slog.LevelInfo, podlog.Empty(line, w.reported))
		}
	})
}

// awaitServing waits until memcached accepts connections. memcached
// restores before it listens, and says nothing of a restore that worked
// (but with -v): accepting connections without having said it starts
// empty, on a saved state, is a restore, reported with the items it holds.
func (w *startWatch) awaitServing(ctx context.Context, restoring bool) {
	for {
		select {
		case <-w.read:
			return
		case <-time.After(50 * time.Millisecond):
		}
		conn, err := net.DialTimeout("tcp", w.c.Address, time.Second)
		if err != nil {
			continue
		}
		conn.Close()
		close(w.serving)
		w.mu.Lock()
		restored := w.outcome == Unknown && restoring
		if restored {
			w.outcome = Restored
		}
		w.mu.Unlock()
		if restored {
			// How many, from memcached itself: what the operator reports
			// of the restart.
			items, err := countItems(ctx, w.c)
			podlog.Write(w.c.Log, slog.LevelInfo, podlog.Restored(items, err, w.reported))
		}
		return
	}
}

// supervise waits for memcached (cmd) to exit, asking it to save and exit
// on stop, or on new settings (changed); ctx ending kills it.
func (w *startWatch) supervise(ctx context.Context, cmd *exec.Cmd, settings []string, stop <-chan os.Signal, changed <-chan []string, exited <-chan error) (ran, error) {
	r := ran{}
	for {
		select {
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			<-exited
			r.code, r.outcome, r.tail = 0, outcomeOf(&w.mu, &w.outcome), w.tail.bytes()
			return r, ctx.Err()
		case <-stop:
			if !r.stopped {
				w.c.Log.Info("Asking memcached to save its cache and exit")
				r.stopped = true
			}
			_ = cmd.Process.Signal(syscall.SIGUSR1)
		case to := <-changed:
			if !r.stopped {
				w.c.Log.Info(SettingsChangedMessage, "from", settings, "to", to)
				r.settingsChanged = true
				_ = cmd.Process.Signal(syscall.SIGUSR1)
			}
		case err := <-exited:
			r.code, r.outcome, r.tail = exitCode(cmd.ProcessState), outcomeOf(&w.mu, &w.outcome), w.tail.bytes()
			var exitErr *exec.ExitError
			if err != nil && !errors.As(err, &exitErr) {
				return r, fmt.Errorf("waiting for memcached: %w", err)
			}
			// Restarted for its settings only when it saved, as asked.
			r.settingsChanged = r.settingsChanged && !r.stopped && r.code == 0
			w.c.Log.Info("memcached exited", "exitCode", r.code, "stopped", r.stopped, "settingsChanged", r.settingsChanged)
			return r, nil
		}
	}
}
