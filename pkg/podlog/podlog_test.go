package podlog

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/example/memcached-operator/pkg/settings"
)

// The operator confirms a restart in place by what the warm runner said at
// the start of memcached's log, among memcached's own lines.
func TestFirstStart(t *testing.T) {
	tests := []struct {
		name string
		log  string
		want string
	}{
		{"restored", `{"time":"t","level":"INFO","msg":"Starting memcached","memoryFile":"/var/lib/memcached/memory"}
slab class   1: chunk size        96 perslab   10922
{"time":"t","level":"INFO","msg":"memcached restored its cache from the memory file","items":1020}
`, "memcached restored 1020 items from its memory file"},
		{"restored, not counted", `{"msg":"memcached restored its cache from the memory file","itemsError":"dial tcp: refused"}`,
			"memcached restored its cache from its memory file; counting its items failed: dial tcp: refused"},
		{"empty", `{"msg":"Starting memcached"}
[restart] original memory base: [0x7f] new base: [0x7f]
{"msg":"memcached started with an empty cache","memcached":"[restart] incompatible due to setting for [maxbytes] [old value: 67108864 new value: 134217728]"}`,
			"memcached started with an empty cache: [restart] incompatible due to setting for [maxbytes] [old value: 67108864 new value: 134217728]"},
		{"nothing", "memcached: unknown option\n", "the warm runner said nothing of a restore at the start of memcached's log"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			said, _ := FirstStart([]byte(tt.log), nil)
			NewWithT(t).Expect(said.String()).To(Equal(tt.want))
		})
	}
}

// A restart in the container for new settings is confirmed by the
// runner's line for those settings, not by one of an earlier start.
func TestFirstStartOfSettings(t *testing.T) {
	g := NewWithT(t)
	log := []byte(`{"msg":"memcached restored its cache from the memory file","items":10,"settings":["--threads=2"]}
<28 new auto-negotiating client connection
{"msg":"memcached's settings changed: restarting it warm to take them","from":["--threads=2"],"to":["--threads=4","-v"]}
{"msg":"memcached restored its cache from the memory file","items":12,"settings":["--threads=4","-v"]}
`)
	said := func(log []byte, annotation string) string {
		flags, err := settings.Parse(annotation)
		g.Expect(err).NotTo(HaveOccurred())
		s, ok := FirstStart(log, flags)
		if !ok {
			return "not yet"
		}
		return s.String()
	}
	g.Expect(said(log, "--threads=4\n-v")).To(Equal("memcached restored 12 items from its memory file"))
	g.Expect(said(log, "--threads=2")).To(Equal("memcached restored 10 items from its memory file"))
	g.Expect(said(log, "--threads=8")).To(Equal("not yet"))
	g.Expect(said([]byte(`{"msg":"memcached restored its cache from the memory file","items":3,"settings":[]}`), "")).
		To(Equal("memcached restored 3 items from its memory file"), "memcached's defaults")
}

// Each report reads back as it was written, through slog's JSON handler as
// the pod-side processes log: no key is named on one side only.
func TestReportsReadBackAsWritten(t *testing.T) {
	g := NewWithT(t)
	var log bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&log, nil))
	count := errors.New("dial tcp: refused")
	starts := []Start{
		Restored(12, nil, []string{"--threads=4", "-v"}),
		Restored(0, count, []string{}),
		Empty("[restart] incompatible", nil),
	}
	for _, s := range starts {
		log.Reset()
		Write(l, slog.LevelInfo, s)
		got, ok := FirstStart(log.Bytes(), nil)
		g.Expect(ok).To(BeTrue(), "%s", log.String())
		g.Expect(got).To(Equal(s), "%s", log.String())
	}
	steps := []Step{
		{Msg: CopiedMessage, Move: 7, Step: "copy", Server: "10.0.0.1:11211", Listed: 10, Leaving: 4, Copied: 3, Present: 1, Gone: 1, Seconds: 0.5},
		{Msg: SettledMessage, Move: 7, Step: "settle", Server: "10.0.0.1:11211", Removed: 3, Invalidated: 1, Uncopied: 2, Seconds: 1.25},
		{Msg: FailedMessage, Move: 7, Step: "copy", Server: "10.0.0.1:11211", Error: "refused", Copied: 2},
	}
	for _, s := range steps {
		log.Reset()
		Write(l, slog.LevelInfo, s)
		msg := s.Msg
		if s.Failed() {
			msg = CopiedMessage
		}
		got, ok := LastStep(log.Bytes(), s.Move, s.Step, msg)
		g.Expect(ok).To(BeTrue(), "%s", log.String())
		g.Expect(got).To(Equal(s), "%s", log.String())
	}
}

// A hand-off's report is found by the membership's version, or by its
// members' digest when the version published is another (the pod's
// mounted membership lagged), or by the digest of the members it copied
// onto: not by a digest of other members, nor by none.
func TestAHandOffIsFoundByItsMembers(t *testing.T) {
	g := NewWithT(t)
	var log bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&log, nil))
	Write(l, slog.LevelInfo, Step{Msg: CopiedMessage, Move: 7, Step: "hand-off", Server: "c-2:11211", Copied: 5, Members: "abc", Onto: "def"})
	got, ok := LastHandOff(log.Bytes(), 7, "other", "other", "hand-off", CopiedMessage)
	g.Expect(ok).To(BeTrue(), "by its version")
	g.Expect(got.Copied).To(Equal(5))
	_, ok = LastHandOff(log.Bytes(), 9, "abc", "other", "hand-off", CopiedMessage)
	g.Expect(ok).To(BeTrue(), "by its members, of another version")
	_, ok = LastHandOff(log.Bytes(), 9, "other", "def", "hand-off", CopiedMessage)
	g.Expect(ok).To(BeTrue(), "by the members it copied onto")
	_, ok = LastHandOff(log.Bytes(), 9, "other", "other", "hand-off", CopiedMessage)
	g.Expect(ok).To(BeFalse(), "other members")
	_, ok = LastHandOff(log.Bytes(), 9, "", "", "hand-off", CopiedMessage)
	g.Expect(ok).To(BeFalse(), "no members named")
	_, ok = LastStep(log.Bytes(), 9, "hand-off", CopiedMessage)
	g.Expect(ok).To(BeFalse(), "LastStep goes by the version alone")
}
