package memcached

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/owned"
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

// Two slots resized (or restarted, or replaced) within one version of the
// Memcached are two events, each naming its pod: client-go's recorder, which
// the manager's is, writes events alike in all but their note as one Event
// with the first one's note and a count, so events about pods name the pod
// as related. The recorder here is client-go's, writing to a clientset.
func TestEventsAboutPodsAreOnePerPod(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clientset := fake.NewClientset()
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: clientset.EventsV1()})
	g.Expect(broadcaster.StartRecordingToSinkWithContext(ctx)).To(Succeed())
	defer broadcaster.Shutdown()
	scheme := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	g.Expect(cachev1alpha1.AddToScheme(scheme)).To(Succeed())

	m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cache", UID: "m", ResourceVersion: "7"}}
	s := newScope(&Reconciler{Recorder: boundedNotes{broadcaster.NewRecorder(scheme, "memcached-operator")}}, m)
	for _, name := range []string{"cache-0", "cache-1"} {
		p := &owned.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: "uid-" + types.UID(name)}}
		s.podEvent(p, corev1.EventTypeNormal, eventResizingInPlace, "Resize", "Pod %s: memcached's container is resized in place, with no restart", name)
	}
	told := func(g Gomega) []string {
		list, err := clientset.EventsV1().Events("ns").List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		var notes []string
		for _, e := range list.Items {
			g.Expect(e.Series).To(BeNil(), "counted as a series: %s", e.Note)
			g.Expect(e.Related).NotTo(BeNil(), e.Note)
			g.Expect(e.Note).To(HavePrefix("Pod "+e.Related.Name+":"), "related to its pod")
			notes = append(notes, e.Note)
		}
		return notes
	}
	g.Eventually(told).Should(ConsistOf(
		"Pod cache-0: memcached's container is resized in place, with no restart",
		"Pod cache-1: memcached's container is resized in place, with no restart"))
}

// recorderFunc records the notes of events.
type recorderFunc func(note string)

func (f recorderFunc) Eventf(_, _ runtime.Object, _, _, _, note string, args ...any) {
	f(fmt.Sprintf(note, args...))
}
