package memcached

import (
	"testing"

	. "github.com/onsi/gomega"
)

// The operator confirms a restart in place by what the warm runner said at
// the start of memcached's log, among memcached's own lines.
func TestRunnerSaid(t *testing.T) {
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
			NewWithT(t).Expect(runnerSaid([]byte(tt.log)).String()).To(Equal(tt.want))
		})
	}
}

func TestOrdinal(t *testing.T) {
	g := NewWithT(t)
	for name, want := range map[string]int32{"cache-0": 0, "cache-12": 12} {
		k, ok := ordinal(name, "cache")
		g.Expect(ok).To(BeTrue(), name)
		g.Expect(k).To(Equal(want), name)
	}
	for _, name := range []string{"cache-x", "other-1", "cache-a-1", "cache"} {
		_, ok := ordinal(name, "cache")
		g.Expect(ok).To(BeFalse(), name)
	}
}
