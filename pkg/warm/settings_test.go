//go:build integration

package warm

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// New settings in the settings file (as the kubelet writes a pod's
// annotation: a new file swapped in) restart memcached warm in the same
// runner, with no restart of its container: memcached takes them and keeps
// every item, and the runner says so with the settings it started on.
func TestNewSettingsRestartMemcachedWarmInTheSameContainer(t *testing.T) {
	dir := memoryDir(t)
	settings := filepath.Join(t.TempDir(), "settings")
	write := func(content string) { writeSettings(t, settings, content) }
	write("--threads=2\n")
	w := startWith(t, dir, settings, "-m", "64")
	fill(t, w.addr, 1000)
	if got := stat(t, w.addr, "stats settings", "num_threads"); got != "2" {
		t.Fatalf("num_threads %s, want 2 from the settings file", got)
	}
	first := w.process().Pid

	write("--threads=4\n--conn-limit=500\n\n")
	w.waitForSetting(t, "num_threads", "4")
	if got := stat(t, w.addr, "stats settings", "maxconns"); got != "500" {
		t.Errorf("maxconns %s, want 500", got)
	}
	if got := items(t, w.addr); got != 1000 {
		t.Fatalf("%d items after the settings changed, want 1000; it said:\n%s", got, w.output())
	}
	if w.process().Pid == first {
		t.Errorf("memcached was not restarted")
	}
	if !w.said(`msg="memcached restored its cache from the memory file" items=1000 settings="[--threads=4 --conn-limit=500]"`) {
		t.Errorf("the restart on the new settings was not reported:\n%s", w.logs.String())
	}
	// The same settings again (a file rewritten, not changed): no restart.
	second := w.process().Pid
	write("--threads=4\n--conn-limit=500\n")
	time.Sleep(500 * time.Millisecond)
	if w.process().Pid != second {
		t.Errorf("memcached restarted for settings that did not change")
	}
	if code := w.stop(t); code != 0 {
		t.Fatalf("exit code %d after a stop, want 0", code)
	}
}

// The settings file is a pod's annotation, which others than the operator
// can write: a flag the operator does not write (here a UDP port, last on
// the command line) never reaches memcached, at its start or in a change;
// the runner says what it refused.
func TestSettingsTheOperatorDoesNotWriteAreRefused(t *testing.T) {
	dir := memoryDir(t)
	settings := filepath.Join(t.TempDir(), "settings")
	writeSettings(t, settings, "--threads=2\n-U 11211\n")
	w := startWith(t, dir, settings, "-m", "64")
	if got := stat(t, w.addr, "stats settings", "num_threads"); got != "2" {
		t.Fatalf("num_threads %s, want 2 from the settings file", got)
	}
	if got := stat(t, w.addr, "stats settings", "udpport"); got != "0" {
		t.Errorf("udpport %s: a refused setting reached memcached", got)
	}
	writeSettings(t, settings, "--threads=3\n-o ssl_verify_mode=0\n")
	w.waitForSetting(t, "num_threads", "3")
	if got := stat(t, w.addr, "stats settings", "udpport"); got != "0" {
		t.Errorf("udpport %s after a change", got)
	}
	if !w.said(RefusedSettingsMessage) || !w.said("ssl_verify_mode") {
		t.Errorf("the refused settings were not told:\n%s", w.logs.String())
	}
	if code := w.stop(t); code != 0 {
		t.Fatalf("exit code %d after a stop, want 0", code)
	}
}

// A new maximum item size in the settings file restarts memcached in the
// same runner too, and it starts empty (memcached keeps no item across
// it), which the runner says with the settings.
func TestANewMaximumItemSizeRestartsMemcachedEmptyInTheSameContainer(t *testing.T) {
	dir := memoryDir(t)
	settings := filepath.Join(t.TempDir(), "settings")
	writeSettings(t, settings, "--max-item-size=1048576\n")
	w := startWith(t, dir, settings, "-m", "64")
	fill(t, w.addr, 100)
	writeSettings(t, settings, "--max-item-size=2097152\n")
	w.waitForSetting(t, "item_size_max", "2097152")
	if got := items(t, w.addr); got != 0 {
		t.Errorf("%d items after the maximum item size changed, want 0", got)
	}
	if !w.said(`msg="memcached started with an empty cache"`) || !w.said(`settings="[--max-item-size=2097152]"`) {
		t.Errorf("the empty start was not reported with its settings:\n%s", w.logs.String())
	}
	if code := w.stop(t); code != 0 {
		t.Fatalf("exit code %d after a stop, want 0", code)
	}
}

// writeSettings replaces the settings file with content as the kubelet
// does a downward API file: a new file renamed over it.
func writeSettings(t *testing.T, file, content string) {
	t.Helper()
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
}

// waitForSetting waits until memcached's stats settings say name is
// value (it refuses connections while it restarts).
func (w *running) waitForSetting(t *testing.T, name, value string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if v, _ := statOf(w.addr, "stats settings", name); v == value {
			return
		}
		if time.Now().After(deadline) || w.exited() {
			t.Fatalf("memcached did not take %s %s; it said:\n%s", name, value, w.output())
		}
	}
}

// New settings memcached refuses at its start (a maximum item size over
// half its memory, which the CRD never lets through, but the file is a
// pod's annotation): the restart for them is a start like the first, on
// the saved state, so the runner tries once more on nothing, as for a save
// memcached trips over, and then hands memcached's failure to the kubelet.
func TestSettingsMemcachedRefusesFailAsAStartDoes(t *testing.T) {
	dir := memoryDir(t)
	settings := filepath.Join(t.TempDir(), "settings")
	writeSettings(t, settings, "--threads=2\n")
	w := startWith(t, dir, settings, "-m", "64")
	fill(t, w.addr, 100)
	writeSettings(t, settings, "--max-item-size=67108864\n")
	if code := w.wait(t); code == 0 {
		t.Fatalf("exit code 0 on settings memcached refuses; it said:\n%s", w.output())
	}
	if !w.said("memcached failed while restoring its memory file; starting it empty") {
		t.Errorf("no start on nothing after the restart for new settings failed:\n%s", w.logs.String())
	}
}
