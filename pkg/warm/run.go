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
	// The settings are reported only where the runner takes them.
	var reported []string
	if c.SettingsFile != "" {
		reported = settings
	}
	if reported != nil {
		c.Log.Info("Starting memcached", "memoryFile", c.MemoryFile, "settings", reported)
	} else {
		c.Log.Info("Starting memcached", "memoryFile", c.MemoryFile)
	}
	if err := cmd.Start(); err != nil {
		return ran{code: CannotStartExitCode, outcome: Unknown}, fmt.Errorf("starting memcached: %w", err)
	}
	if c.Started != nil {
		c.Started(cmd.Process)
	}
	var (
		mu      sync.Mutex
		outcome = Unknown
		read    = make(chan struct{})
		serving = make(chan struct{})
		done    = make(chan struct{})
		tail    = &tailWriter{max: podlog.OutputLimit}
	)
	defer close(done)
	go func() {
		defer close(read)
		watchOutput(stderr, io.MultiWriter(c.Stderr, tail), func(line string) {
			mu.Lock()
			defer mu.Unlock()
			if outcome == Unknown {
				outcome = Empty
				podlog.Write(c.Log, slog.LevelInfo, podlog.Empty(line, reported))
			}
		})
	}()
	// memcached restores before it listens, and says nothing of a restore
	// that worked (but with -v): accepting connections without having
	// said it starts empty, on a saved state, is a restore.
	go func() {
		for {
			select {
			case <-read:
				return
			case <-time.After(50 * time.Millisecond):
			}
			conn, err := net.DialTimeout("tcp", c.Address, time.Second)
			if err != nil {
				continue
			}
			conn.Close()
			close(serving)
			mu.Lock()
			restored := outcome == Unknown && restoring
			if restored {
				outcome = Restored
			}
			mu.Unlock()
			if restored {
				// How many, from memcached itself: what the operator
				// reports of the restart.
				items, err := countItems(ctx, c)
				podlog.Write(c.Log, slog.LevelInfo, podlog.Restored(items, err, reported))
			}
			return
		}
	}()
	changed := make(chan []string, 1)
	if c.SettingsFile != "" {
		// Only once memcached serves: before it has restored, SIGUSR1
		// would end it without saving.
		go watchSettings(c, settings, serving, done, changed)
	}
	exited := make(chan error, 1)
	go func() {
		<-read // Wait closes the pipe: read it all first.
		exited <- cmd.Wait()
	}()
	r := ran{}
	for {
		select {
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			<-exited
			r.code, r.outcome, r.tail = 0, outcomeOf(&mu, &outcome), tail.bytes()
			return r, ctx.Err()
		case <-stop:
			if !r.stopped {
				c.Log.Info("Asking memcached to save its cache and exit")
				r.stopped = true
			}
			_ = cmd.Process.Signal(syscall.SIGUSR1)
		case to := <-changed:
			if !r.stopped {
				c.Log.Info(SettingsChangedMessage, "from", settings, "to", to)
				r.settingsChanged = true
				_ = cmd.Process.Signal(syscall.SIGUSR1)
			}
		case err := <-exited:
			r.code, r.outcome, r.tail = exitCode(cmd.ProcessState), outcomeOf(&mu, &outcome), tail.bytes()
			var exitErr *exec.ExitError
			if err != nil && !errors.As(err, &exitErr) {
				return r, fmt.Errorf("waiting for memcached: %w", err)
			}
			// Restarted for its settings only when it saved, as asked.
			r.settingsChanged = r.settingsChanged && !r.stopped && r.code == 0
			c.Log.Info("memcached exited", "exitCode", r.code, "stopped", r.stopped, "settingsChanged", r.settingsChanged)
			return r, nil
		}
	}
}
