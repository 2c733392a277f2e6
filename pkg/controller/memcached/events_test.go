package memcached

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
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

// Every event the operator records is cut so: here one quoting a pod's
// termination message, which the kubelet allows up to 4096 bytes.
func TestEveryEventNoteIsBounded(t *testing.T) {
	g := NewWithT(t)
	var got []string
	r := boundedNotes{recorderFunc(func(note string) { got = append(got, note) })}
	r.Eventf(nil, nil, "Warning", eventReloadFailed, "Restart", "Pod %s could not load the new Secret content in place (%s)", "cache-0", strings.Repeat("é", 2048))
	r.Eventf(nil, nil, "Normal", eventCreated, "Create", "Created %s", "Deployment cache")
	g.Expect(got).To(HaveLen(2))
	g.Expect(len(got[0])).To(BeNumerically("<=", maxEventNote))
	g.Expect(got[0]).To(HavePrefix("Pod cache-0 could not load"))
	g.Expect(got[1]).To(Equal("Created Deployment cache"))
}

// recorderFunc records the notes of events.
type recorderFunc func(note string)

func (f recorderFunc) Eventf(_, _ runtime.Object, _, _, _, note string, args ...any) {
	f(fmt.Sprintf(note, args...))
}
