// Command warm runs memcached in a Memcached's pod so that a restart of its
// container keeps the cache (package warm): memcached's item memory lives
// in a file on the pod's memory-backed volume, the kubelet's SIGTERM
// becomes SIGUSR1 (save and exit), and the next memcached restores the
// items.
//
//	warm --memory-file=/var/lib/memcached/memory [--settings-file=FILE] -- memcached --port=11211 ...
//
// Settings memcached keeps across a warm restart (threads, connections,
// verbosity) can come from a file (the pod's annotation, through the
// downward API) rather than the command line: when the file changes, the
// runner restarts memcached warm in the same container to take them.
//
// It runs in the memcached container, whose image is the user's: the pod's
// init container copies it there first (--install), from the operator's
// image. It makes no request to the apiserver.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/example/memcached-operator/pkg/move"
	"github.com/example/memcached-operator/pkg/podlog"
	"github.com/example/memcached-operator/pkg/warm"
)

func main() {
	var (
		c              warm.Config
		install        string
		terminationLog string
		awaitHandOff   string
		atLeast        time.Duration
	)
	flag.StringVar(&c.MemoryFile, "memory-file", "", "The file memcached maps its item memory from, on a memory-backed volume.")
	flag.StringVar(&c.SettingsFile, "settings-file", "", "A file of memcached's flags, one per line, added to its command line; when its content changes, memcached restarts warm to take them.")
	flag.DurationVar(&c.RestoreWindow, "restore-window", warm.DefaultRestoreWindow, "How long after a start that restores a failure of memcached means its saved state is unusable: it is then started empty.")
	flag.StringVar(&install, "install", "", "Copy this program to the given path and exit (the pod's init container).")
	flag.StringVar(&terminationLog, "termination-log", "/dev/termination-log", "Where the end of memcached's output is written when it fails, or the reason it could not be run.")
	flag.StringVar(&awaitHandOff, "await-hand-off", "", "Ask the pod's discovery container to hand the pod's keys off through this directory, wait until it has, and exit (the memcached container's preStop hook).")
	flag.DurationVar(&atLeast, "at-least", 0, "With --await-hand-off, wait at least this long: the time for clients to leave a pod being deleted.")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: %s --memory-file=FILE -- memcached [memcached's flags]\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()

	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if install != "" {
		if err := copySelf(install); err != nil {
			log.Error("Cannot install", "to", install, "error", err.Error())
			os.Exit(1)
		}
		log.Info("Installed", "to", install)
		return
	}
	if awaitHandOff != "" {
		if err := move.AwaitHandOff(context.Background(), awaitHandOff, move.MemcachedHook, atLeast); err != nil {
			log.Error("Cannot await the hand-off", "error", err.Error())
			os.Exit(1)
		}
		return
	}
	c.Command = flag.Args()
	if c.MemoryFile == "" || len(c.Command) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	c.Log = log
	c.TerminationLog = terminationLog
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	code, err := warm.Run(context.Background(), c, stop)
	if err != nil {
		log.Error("Cannot run memcached", "error", err.Error())
		// The container's termination message, which the operator quotes
		// in the Memcached's status.
		if werr := podlog.TerminateWithError(terminationLog, err); werr != nil {
			log.Error("Cannot write the termination message", "error", werr.Error())
		}
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// copySelf copies the running program to path, executable.
func copySelf(path string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(self)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(path), ".warm-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o555); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
