// Command reloader runs beside memcached in a Memcached's pod and has it
// load the certificate and authentication file the kubelet places there
// when their Secrets change, without a restart (package reload).
//
// It makes no request to the apiserver. With --served-dir, memcached reads
// its files only from there, and the reloader copies the mounted files
// there once they pass its checks: first as the pod's init container
// (--prepare), then at each change. When a reload is not confirmed in time it writes why to its
// termination message and exits with code 3: the operator, which watches
// the pods, then restarts them one at a time instead.
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/example/memcached-operator/pkg/podlog"
	"github.com/example/memcached-operator/pkg/reload"
)

func main() {
	var (
		c              reload.Config
		terminationLog string
		prepare        bool
	)
	flag.StringVar(&c.Address, "memcached-address", "localhost:11211", "memcached's address in the pod.")
	flag.StringVar(&c.TLSDir, "tls-dir", "", "Directory of memcached's tls.crt, tls.key and ca.crt; empty: no TLS.")
	flag.StringVar(&c.ServerName, "server-name", "", "The name clients verify memcached's certificate for; a certificate without it is not loaded.")
	flag.BoolVar(&c.ClientCertificate, "client-certificate", false, "Present tls.crt and tls.key as a client certificate (memcached verifies clients).")
	flag.StringVar(&c.AuthFile, "auth-file", "", "memcached's authentication file; empty: none.")
	flag.DurationVar(&c.Interval, "interval", time.Second, "How often the mounted files are read.")
	flag.DurationVar(&c.Timeout, "timeout", 30*time.Second, "How long a reload may take to be confirmed.")
	flag.StringVar(&c.ServedDir, "served-dir", "", "Directory memcached reads its files from, which the reloader fills with the mounted files it checked; empty: memcached reads the mounted files.")
	flag.BoolVar(&prepare, "prepare", false, "Check the mounted files, copy them to --served-dir and exit (the pod's init container, before memcached starts).")
	flag.StringVar(&terminationLog, "termination-log", "/dev/termination-log", "Where a failed reload is written before exiting.")
	flag.Parse()

	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	c.Log = log
	if prepare {
		if err := reload.Prepare(c, time.Now()); err != nil {
			log.Error("cannot prepare memcached's files", "error", err.Error())
			writeTermination(log, terminationLog, err)
			os.Exit(1)
		}
		log.Info("memcached's files checked and in place", "servedDir", c.ServedDir)
		return
	}
	r, err := reload.New(c)
	if err != nil {
		log.Error("cannot start", "error", err.Error())
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log.Info("following the mounted files", "tlsDir", c.TLSDir, "authFile", c.AuthFile, "interval", c.Interval.String(), "timeout", c.Timeout.String())
	err = r.Run(ctx)
	if err == nil {
		return
	}
	log.Error("reload failed", "error", err.Error())
	var f *reload.Failure
	if errors.As(err, &f) {
		writeTermination(log, terminationLog, err)
		stop()
		os.Exit(reload.FailedExitCode)
	}
	stop()
	os.Exit(1)
}

// writeTermination writes err to the container's termination message,
// which the operator reads from the pod's status.
func writeTermination(log *slog.Logger, path string, err error) {
	if werr := podlog.TerminateWithError(path, err); werr != nil {
		log.Error("cannot write the termination message", "error", werr.Error())
	}
}
