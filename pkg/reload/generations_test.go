//go:build integration

package reload_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/pkg/reload"
)

// The served directory keeps one generation of the files, whatever the
// number of reloads; an authentication file unfit to load is refused and
// said once, however often it is looked at, and memcached keeps the one
// it has.
func TestTheServedFilesKeepOneGenerationAndAnUnfitFileIsToldOnce(t *testing.T) {
	authDir, served := filesDir(t), servedDir(t)
	authFile := filepath.Join(authDir, "authfile")
	write(t, authDir, "authfile", []byte("alice:one\n"))
	var log bytes.Buffer
	c := reload.Config{AuthFile: authFile, ServedDir: served, Timeout: 3 * time.Second, Log: slog.New(slog.NewTextHandler(&log, nil))}
	if err := reload.Prepare(c, time.Now()); err != nil {
		t.Fatal(err)
	}
	m := startMemcached(t, served, "--auth-file="+filepath.Join(served, "authfile"))
	c.Address, c.Signal = m.addr, signal(m.cmd.Process.Pid)
	r, err := reload.New(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, content := range []string{"bob:two\n", "carol:three\n"} {
		write(t, authDir, "authfile", []byte(content))
		if err := r.Check(context.Background()); err != nil {
			t.Fatalf("reloading %q: %v", content, err)
		}
	}
	gens, err := filepath.Glob(filepath.Join(served, "..gen-*"))
	if err != nil || len(gens) != 1 {
		t.Errorf("the served directory holds generations %v (%v), want one", gens, err)
	}

	write(t, authDir, "authfile", []byte("dave\n"))
	for range 3 {
		if err := r.Check(context.Background()); err != nil {
			t.Fatalf("an unfit file: %v", err)
		}
	}
	if n := strings.Count(log.String(), "not fit to load"); n != 1 {
		t.Errorf("the unfit file was told %d times, want once:\n%s", n, log.String())
	}
	client(t, m.addr, false, nil, "carol:three")
}

// The reloader does not start on an authentication file it cannot read.
func TestAnAuthenticationFileThatCannotBeReadStopsTheStart(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "authfile")
	if _, err := reload.New(reload.Config{AuthFile: missing}); !os.IsNotExist(err) {
		t.Errorf("New with no authentication file: %v, want it not found", err)
	}
}
