package warm

import "testing"

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
