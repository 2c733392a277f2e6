package warm

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/pkg/settings"
)

func TestStartsEmptyReadsMemcachedsLines(t *testing.T) {
	for _, tc := range []struct {
		line string
		want bool
	}{
		{"[restart] no metadata save file, starting with a clean cache", true},
		{"[restart] failed to validate metadata, starting with a clean cache", true},
		{"[restart] recovery end [1796358152.346263]", false},
		{"[restart] restart incompatible due to setting for [maxbytes] [old value: 67108864]", false},
		{"<26 new auto-negotiating client connection", false},
	} {
		if got := startsEmpty(tc.line); got != tc.want {
			t.Errorf("startsEmpty(%q) = %v, want %v", tc.line, got, tc.want)
		}
	}
}

func TestTailKeepsTheEnd(t *testing.T) {
	w := &tailWriter{max: 5}
	for _, s := range []string{"abc", "defg", "h"} {
		w.Write([]byte(s))
	}
	if got := string(w.bytes()); got != "defgh" {
		t.Errorf("tail %q, want %q", got, "defgh")
	}
}

func TestPortOfReadsMemcachedsCommandLine(t *testing.T) {
	for _, tc := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"memcached", "--port=11311", "--threads=2"}, "11311"},
		{[]string{"memcached", "-p", "11411"}, "11411"},
		{[]string{"memcached", "--port", "11511"}, "11511"},
		{[]string{"memcached", "--threads=2"}, "11211"},
	} {
		if got := portOf(tc.cmd); got != tc.want {
			t.Errorf("portOf(%q) = %q, want %q", tc.cmd, got, tc.want)
		}
	}
}

// A line longer than the scanner's first buffer (memcached at -vv prints
// keys and values) is copied whole, and the lines after it are still read.
func TestALongLineKeepsTheOutputRead(t *testing.T) {
	long := strings.Repeat("x", 200*1024)
	in := long + "\n[restart] no metadata save file, starting with a clean cache\n"
	var out strings.Builder
	var said []string
	watchOutput(strings.NewReader(in), &out, func(line string) { said = append(said, line) })
	if out.String() != in {
		t.Errorf("copied %d bytes, want %d", out.Len(), len(in))
	}
	if len(said) != 1 {
		t.Errorf("the empty start after a long line told %d times, want once", len(said))
	}
}

// What a Config leaves unset is set: memcached's output to the runner's,
// its address from its port, the settings' poll and the restore window;
// what it sets is kept.
func TestAConfigIsCompletedWithDefaults(t *testing.T) {
	c := Config{Command: []string{"memcached", "--port=11311"}}.withDefaults()
	if c.Stdout != os.Stdout || c.Stderr != os.Stderr {
		t.Errorf("memcached's output goes to %v and %v, want the runner's", c.Stdout, c.Stderr)
	}
	if c.Address != "localhost:11311" || c.SettingsPoll != time.Second || c.RestoreWindow != DefaultRestoreWindow || c.Log == nil {
		t.Errorf("defaults: address %q, settings poll %s, restore window %s, log %v", c.Address, c.SettingsPoll, c.RestoreWindow, c.Log)
	}
	var buf bytes.Buffer
	set := Config{Command: []string{"memcached"}, Stdout: &buf, Stderr: &buf, Address: "127.0.0.1:1", SettingsPoll: time.Minute, RestoreWindow: time.Hour}.withDefaults()
	if set.Stdout != &buf || set.Stderr != &buf || set.Address != "127.0.0.1:1" || set.SettingsPoll != time.Minute || set.RestoreWindow != time.Hour {
		t.Errorf("what was set is not kept: %+v", set)
	}
}

// Settings the runner refuses are logged once, not at every poll.
func TestRefusedSettingsAreToldOnce(t *testing.T) {
	file := filepath.Join(t.TempDir(), "settings")
	if err := os.WriteFile(file, []byte("--threads=2\n--port=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	c := Config{SettingsFile: file, SettingsPoll: 5 * time.Millisecond, Log: slog.New(slog.NewTextHandler(&logs, nil))}
	serving, done := make(chan struct{}), make(chan struct{})
	close(serving)
	running, err := settings.Parse("--threads=2")
	if err != nil {
		t.Fatal(err)
	}
	finished, changed := make(chan struct{}), make(chan []string, 1)
	go func() {
		defer close(finished)
		watchSettings(c, running, serving, done, changed)
	}()
	time.Sleep(100 * time.Millisecond)
	close(done)
	<-finished
	if len(changed) > 0 {
		t.Fatalf("the settings taken, %v, were told as changed from %v", <-changed, running)
	}
	if n := strings.Count(logs.String(), RefusedSettingsMessage); n != 1 {
		t.Errorf("refused settings told %d times in 20 polls, want once:\n%s", n, logs.String())
	}
}
