// Package warm runs memcached so that a restart of its container keeps the
// cache (memcached's warm restart, since 1.5.18).
//
// memcached maps its item memory from a file on the pod's memory-backed
// volume (--memory-file). On SIGUSR1 it stops taking connections, saves
// what it needs to find its items again beside the file (<file>.meta) and
// exits; the next memcached started on the same file restores every item,
// whatever else changed on its command line but the memory limit, the
// maximum item size, the slab settings and CAS. The volume outlives the
// container, not the pod: a container restarted in its pod (a new image, a
// failed liveness probe) comes back warm, a new pod empty.
//
// The kubelet stops a container with SIGTERM, on which memcached exits
// without saving: Run stands between the two, turns SIGTERM into SIGUSR1,
// and returns memcached's exit code. It also starts memcached empty when
// the saved state cannot be used: memcached 1.6.18 aborts on a truncated
// .meta file, and it refuses to restore in the second it saved.
package warm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/example/memcached-operator/pkg/podlog"
)

// MetaSuffix is the suffix of the file beside the memory file in which
// memcached saves its state on SIGUSR1; memcached removes it once read.
const MetaSuffix = ".meta"

// DefaultRestoreWindow is how long after a start that restores a failure of
// memcached means its saved state is unusable: memcached restores a memory
// file of 64 MiB to 1 GiB in well under a second on the real node, and a
// crash of a memcached that runs on a restored cache comes later.
const DefaultRestoreWindow = 30 * time.Second

// CannotStartExitCode is Run's exit code when memcached's program cannot
// be started at all (not in the image, say), as a shell's for a command it
// cannot find: no restart mends it.
const CannotStartExitCode = 127

// SettingsChangedMessage is the message of the runner's log line when the
// content of its settings file changed: it restarts memcached warm, in the
// same container, to take them, with "from" and "to" the settings.
const SettingsChangedMessage = "memcached's settings changed: restarting it warm to take them"

// RefusedSettingsMessage is the message of the runner's log line when its
// settings file holds flags the operator does not write: they are left
// out of memcached's command line.
const RefusedSettingsMessage = "Refusing settings the operator does not write"

// Outcome is what a memcached started on a memory file said of it.
type Outcome string

const (
	// Restored: memcached found its saved state and restored its items.
	Restored Outcome = "Restored"
	// Empty: memcached started with an empty cache (nothing saved, or what
	// was saved does not fit its settings).
	Empty Outcome = "Empty"
	// Unknown: memcached said neither before it exited.
	Unknown Outcome = "Unknown"
)

// Config is how Run starts memcached.
type Config struct {
	// Command is memcached's command line, without --memory-file.
	Command []string
	// MemoryFile is the file memcached maps its item memory from, on a
	// memory-backed volume.
	MemoryFile string
	// SettingsFile, if set, holds settings that memcached keeps across a
	// warm restart (threads, connections, verbosity): its command-line
	// flags, one per line, added to Command at each start. When the file's
	// content changes, Run restarts memcached warm in the same container to
	// take them (on a pod, the file is the pod's annotation, which can
	// change where the container's command line cannot).
	SettingsFile string
	// SettingsPoll is how often SettingsFile is read for a change, once
	// memcached serves; zero: every second.
	SettingsPoll time.Duration
	// RestoreWindow is how long after a start that tried to restore a
	// failure of memcached is taken for an unusable saved state, and
	// memcached started again empty; zero: DefaultRestoreWindow.
	RestoreWindow time.Duration
	// Address is where memcached accepts connections once it has started
	// (and restored); empty: localhost and the port of Command (--port=,
	// else memcached's 11211).
	Address string
	// Stdout and Stderr receive memcached's output; nil: Run's own.
	Stdout, Stderr io.Writer
	// Log receives what Run does.
	Log *slog.Logger
	// TerminationLog, if set, is where the end of memcached's standard
	// error is written when it fails (the container's termination message,
	// which the kubelet would otherwise take from the log's end: the
	// runner's own lines).
	TerminationLog string
	// Started, if set, is told each memcached's process once it started
	// (tests read it).
	Started func(*os.Process)
}

// Run starts memcached on c.MemoryFile and returns its exit code once it
// has exited. A signal on stop asks memcached to save and exit (SIGUSR1);
// ctx ending kills it.
func Run(ctx context.Context, c Config, stop <-chan os.Signal) (int, error) {
	if len(c.Command) == 0 {
		return 0, errors.New("no memcached command line")
	}
	c = c.withDefaults()
	meta := c.MemoryFile + MetaSuffix
	for attempt := 0; ; attempt++ {
		settings, refused, err := readSettings(c.SettingsFile)
		if err != nil {
			return 0, err
		}
		if refused != nil {
			c.Log.Error(RefusedSettingsMessage, "error", refused.Error())
		}
		saved, err := waitForRestorable(ctx, meta, stop)
		if err != nil {
			return 0, err
		}
		if saved.stopped {
			c.Log.Info("Stopped before memcached started")
			return 0, nil
		}
		started := time.Now()
		r, err := runOnce(ctx, c, settings, saved.present, stop)
		code, outcome, tail := r.code, r.outcome, r.tail
		if err != nil {
			return code, err
		}
		if r.settingsChanged {
			// Saved: the next start, on the new settings, restores it.
			attempt = -1
			continue
		}
		failed := code != 0 && !r.stopped
		if failed && saved.present && attempt == 0 && time.Since(started) < c.RestoreWindow {
			// The saved state is what memcached tripped over: start it
			// again on nothing rather than let the kubelet restart it into
			// the same files.
			c.Log.Error("memcached failed while restoring its memory file; starting it empty",
				"exitCode", code, "outcome", string(outcome))
			if err := removeSavedState(c); err != nil {
				return code, err
			}
			continue
		}
		if failed && c.TerminationLog != "" {
			if err := podlog.TerminateWithOutput(c.TerminationLog, tail); err != nil {
				c.Log.Error("Cannot write the termination message", "error", err.Error())
			}
		}
		return code, nil
	}
}

// withDefaults is c with what it leaves unset set.
func (c Config) withDefaults() Config {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Stdout == nil {
		c.Stdout = os.Stdout
	}
	if c.Stderr == nil {
		c.Stderr = os.Stderr
	}
	if c.Address == "" {
		c.Address = net.JoinHostPort("localhost", portOf(c.Command))
	}
	if c.SettingsPoll == 0 {
		c.SettingsPoll = time.Second
	}
	if c.RestoreWindow == 0 {
		c.RestoreWindow = DefaultRestoreWindow
	}
	return c
}

// removeSavedState removes memcached's memory file and its metadata.
func removeSavedState(c Config) error {
	for _, f := range []string{c.MemoryFile + MetaSuffix, c.MemoryFile} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing %s: %w", f, err)
		}
	}
	return nil
}

// savedState is what waitForRestorable found.
type savedState struct {
	// present: a saved state is there for memcached to restore.
	present bool
	// stopped: a stop signal came while waiting.
	stopped bool
}

// waitForRestorable returns once memcached can restore the state saved in
// meta, if any: memcached refuses a restore in the wall-clock second of the
// save (it takes an elapsed time of zero for a clock gone wrong), so a
// start right after a stop waits for the next second.
func waitForRestorable(ctx context.Context, meta string, stop <-chan os.Signal) (savedState, error) {
	fi, err := os.Stat(meta)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return savedState{}, nil
	case err != nil:
		return savedState{}, fmt.Errorf("reading memcached's saved state: %w", err)
	}
	next := fi.ModTime().Truncate(time.Second).Add(time.Second)
	if wait := time.Until(next); wait > 0 {
		select {
		case <-ctx.Done():
			return savedState{}, ctx.Err()
		case <-stop:
			return savedState{stopped: true}, nil
		case <-time.After(wait):
		}
	}
	return savedState{present: true}, nil
}
