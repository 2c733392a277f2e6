package reload

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// What a Config leaves unset is set: a look each second, 30 s for a
// reload to be confirmed; what it sets is kept.
func TestAConfigIsCompletedWithDefaults(t *testing.T) {
	auth := filepath.Join(t.TempDir(), "authfile")
	if err := os.WriteFile(auth, []byte("alice:one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{AuthFile: auth})
	if err != nil {
		t.Fatal(err)
	}
	if r.c.Interval != time.Second || r.c.Timeout != 30*time.Second || r.c.Signal == nil || r.c.Log == nil {
		t.Errorf("defaults: interval %s, timeout %s", r.c.Interval, r.c.Timeout)
	}
	r, err = New(Config{AuthFile: auth, Interval: time.Minute, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if r.c.Interval != time.Minute || r.c.Timeout != time.Hour {
		t.Errorf("set: interval %s, timeout %s", r.c.Interval, r.c.Timeout)
	}
}
