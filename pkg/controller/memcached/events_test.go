package memcached

import (
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/gomega"
)

// The events API refuses a note longer than 1024 bytes, and the whole
// event with it: a long note is cut, at a character boundary, and says so.
func TestEventNoteFitsTheEventsAPI(t *testing.T) {
	g := NewWithT(t)
	short := strings.Repeat("a", maxEventNote)
	g.Expect(eventNote(short)).To(Equal(short))

	for _, long := range []string{strings.Repeat("a", 3000), strings.Repeat("é", 700), "x" + strings.Repeat("€", 400)} {
		got := eventNote(long)
		g.Expect(len(got)).To(BeNumerically("<=", maxEventNote))
		g.Expect(len(got)).To(BeNumerically(">", maxEventNote-8))
		g.Expect(utf8.ValidString(got)).To(BeTrue(), "cut inside a character")
		g.Expect(got).To(HaveSuffix(" …"))
		g.Expect(long).To(HavePrefix(strings.TrimSuffix(got, " …")))
	}
}
