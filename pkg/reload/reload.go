// Package reload renews, without a restart, what memcached serves from the
// Secrets its pod mounts: it runs beside memcached in the pod, looks at the
// mounted files, and when the kubelet has placed new ones tells memcached
// to load them and checks that it did.
//
//   - A new certificate: the refresh_certs command, then a new TLS handshake
//     must show the mounted certificate (memcached 1.6 reloads its
//     certificate, key and CA on that command, and on nothing else).
//   - A new authentication file: SIGHUP, on which memcached 1.6 reads the
//     file again (on its next one-second clock tick), then a login with a
//     user the new file adds must succeed, or one it removes must fail.
//
// A reload not confirmed within Config.Timeout is a *Failure: the pod then
// says so (cmd/reloader makes it the container's termination message) and
// the operator restarts the pods instead.
package reload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/example/memcached-operator/pkg/material"
)

// Config says what to reload and how.
type Config struct {
	// Address is memcached's address from inside the pod (localhost:port).
	Address string
	// TLSDir holds the files material.CertKey, material.KeyKey and, when
	// memcached verifies clients, material.CAKey. Empty: memcached serves
	// no TLS.
	TLSDir string
	// ClientCertificate: memcached asks clients for a certificate, and the
	// reloader presents the mounted one (as the exporter does).
	ClientCertificate bool
	// ServerName is the name clients verify memcached's certificate for;
	// a certificate that does not carry it is not loaded. Empty: not checked.
	ServerName string
	// AuthFile is memcached's authentication file. Empty: none.
	AuthFile string
	// ServedDir, when set, is where memcached reads its files from instead
	// of TLSDir and AuthFile: the reloader copies them there once they
	// pass its checks (Prepare, before memcached starts; then each change),
	// and keeps there what it must remember across its restarts (see
	// served.go). Empty: memcached reads the mounted files themselves.
	ServedDir string
	// Interval is how often the mounted files are read.
	Interval time.Duration
	// Timeout bounds a reload, from seeing new files to confirming that
	// memcached uses them.
	Timeout time.Duration
	// Signal tells memcached to read its authentication file again; nil:
	// SIGHUP to the memcached process of the pod (signalMemcached).
	Signal func() error
	// Log receives one record per reload.
	Log *slog.Logger
}

// FailedExitCode is the reloader's exit code when a reload was not
// confirmed in time (a Failure); its termination message then says why.
const FailedExitCode = 3

// Failure is a reload that was not confirmed in time.
type Failure struct {
	// What is "certificate" or "authentication file".
	What string
	Err  error
}

func (f *Failure) Error() string {
	return fmt.Sprintf("memcached did not load the new %s: %v", f.What, f.Err)
}

func (f *Failure) Unwrap() error { return f.Err }

// Reloader follows the mounted files of one pod.
type Reloader struct {
	c Config
	// loaded is what memcached was last seen (or assumed at start) to use.
	loaded files
	// refused is the digest of the TLS files last found unfit, not sent to
	// memcached: told once, not every Interval; until refusedUntil when it
	// is not zero, the moment a certificate not valid yet becomes valid,
	// when they are looked at again.
	refused      string
	refusedUntil time.Time
	// published is what the served directory holds (with ServedDir):
	// content is published once checked, before memcached is told, so
	// that after a failed reload a restarted reloader (which takes the
	// served files as loaded) does not try it again and fail again: the
	// operator restarts the pod once for it, and the pod starts from it.
	published files
	// refusedAuth is the digest of the authentication file last found
	// unfit: told once.
	refusedAuth string
}

// New returns a Reloader that takes the files served now (with
// c.ServedDir; else the files mounted now) as those memcached loaded.
func New(c Config) (*Reloader, error) {
	if c.TLSDir == "" && c.AuthFile == "" {
		return nil, errors.New("nothing to reload: neither a TLS directory nor an authentication file")
	}
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	if c.Signal == nil {
		c.Signal = signalMemcached
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	r := &Reloader{c: c}
	read := r.read
	if c.ServedDir != "" {
		read = r.served
	}
	f, err := read()
	if err != nil {
		return nil, err
	}
	r.loaded, r.published = f, f
	return r, nil
}

// Run looks at the files every Interval and reloads what changed, until
// ctx ends (nil) or a reload fails (a *Failure).
func (r *Reloader) Run(ctx context.Context) error {
	t := time.NewTicker(r.c.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := r.Check(ctx); err != nil {
			var f *Failure
			if errors.As(err, &f) {
				return err
			}
			// A file between two writes of the kubelet, or not there yet:
			// the next look sees it whole.
			r.c.Log.Warn("cannot read the mounted files", "error", err.Error())
		}
	}
}

// Check reloads what changed since the last look, once: a *Failure when
// memcached does not take it within Timeout, another error when the files
// cannot be read.
func (r *Reloader) Check(ctx context.Context) error {
	now, err := r.read()
	if err != nil {
		return err
	}
	if r.c.AuthFile != "" && now.authDigest() != r.loaded.authDigest() {
		if err := r.loadAuth(ctx, now); err != nil {
			return err
		}
	}
	if r.refused != "" && !r.refusedUntil.IsZero() && !time.Now().Before(r.refusedUntil) {
		r.refused, r.refusedUntil = "", time.Time{}
	}
	if r.c.TLSDir != "" && now.tlsDigest() != r.loaded.tlsDigest() && now.tlsDigest() != r.refused {
		return r.loadTLS(ctx, now)
	}
	return nil
}

// loadAuth has memcached load the authentication file of now, when it is
// fit to.
func (r *Reloader) loadAuth(ctx context.Context, now files) error {
	if err := r.authFit(now.auth); err != nil {
		if r.refusedAuth != now.authDigest() {
			r.refusedAuth = now.authDigest()
			r.c.Log.Warn("the mounted authentication file is not fit to load; memcached keeps the one it has", "error", err.Error())
		}
		return nil
	}
	next := r.published
	next.auth = now.auth
	if err := r.publishIfServed(next); err != nil {
		return err
	}
	start := time.Now()
	if err := r.reloadAuth(ctx, now.auth); err != nil {
		return &Failure{What: "authentication file", Err: err}
	}
	r.loaded.auth = now.auth
	r.c.Log.Info("memcached loaded the new authentication file", "took", time.Since(start).String())
	return nil
}

// loadTLS has memcached serve the certificate of now, when it is fit to.
// memcached 1.6.18 given a key that is not its certificate's on
// refresh_certs fails every handshake after: unfit files are never sent.
// The operator reports the Secret as invalid.
func (r *Reloader) loadTLS(ctx context.Context, now files) error {
	at := time.Now()
	if c, err := material.Fit(now.cert, now.key, now.ca, r.c.ServerName, at); err != nil {
		r.refused, r.refusedUntil = now.tlsDigest(), time.Time{}
		if c != nil && at.Before(c.NotBefore) {
			// Fit once valid, unless something else is wrong then.
			r.refusedUntil = c.NotBefore
		}
		r.c.Log.Warn("the mounted certificate is not fit to serve; memcached keeps the one it has", "error", err.Error())
		return nil
	}
	if gone := removedCAs(r.loaded.ca, now.ca); r.c.ClientCertificate && len(gone) > 0 {
		// memcached 1.6's refresh_certs adds ca.crt's certificates to
		// those it trusts and never removes one: a client of a CA taken
		// out would still get in. Only a new process forgets it. Nothing
		// is published: a restarted reloader, which takes the served
		// files as loaded, must see the removal again, and fail again,
		// until memcached restarts (a new pod starts from the mounted
		// files).
		return &Failure{What: "certificate", Err: fmt.Errorf("%s no longer holds %s, and refresh_certs cannot make memcached stop trusting a CA: the pods must restart",
			material.CAKey, strings.Join(gone, ", "))}
	}
	next := r.published
	next.cert, next.key, next.ca = now.cert, now.key, now.ca
	if err := r.publishIfServed(next); err != nil {
		return err
	}
	start := time.Now()
	leaf, err := r.reloadTLS(ctx, now)
	if err != nil {
		return &Failure{What: "certificate", Err: err}
	}
	r.loaded.cert, r.loaded.key, r.loaded.ca = now.cert, now.key, now.ca
	r.c.Log.Info("memcached serves the new certificate", "serial", leaf.SerialNumber.String(),
		"notAfter", leaf.NotAfter.UTC().Format(time.RFC3339), "took", time.Since(start).String())
	return nil
}

// authFit tells whether memcached reads b as an authentication file that
// lets every user in: with a served directory only, as before it the
// mounted file reached memcached unchecked (the operator reports it).
func (r *Reloader) authFit(b []byte) error {
	if r.c.ServedDir == "" {
		return nil
	}
	return material.CheckAuthFile(b)
}

// publishIfServed makes f the served directory's content, when memcached
// reads one.
func (r *Reloader) publishIfServed(f files) error {
	if r.c.ServedDir == "" {
		return nil
	}
	if err := r.publish(f); err != nil {
		return fmt.Errorf("publishing the checked files to %s: %w", r.c.ServedDir, err)
	}
	r.published = f
	return nil
}
