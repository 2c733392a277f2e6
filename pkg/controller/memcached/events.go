package memcached

import (
	"fmt"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/pkg/owned"
)

// report is one object created, scaled, updated or deleted by a reconcile,
// as the reconcile's event tells it.
type report struct {
	reason string // an event reason: eventCreated, eventScaled, ...
	note   string // lower-case, to be joined with others
	obj    client.Object
}

// eventActions are the events.k8s.io actions of the report reasons.
var eventActions = map[string]string{eventCreated: "Create", eventScaled: "Scale", eventUpdated: "Update", eventDeleted: "Delete"}

// recordReports tells the reports of one reconcile in one event, under the
// reason of the first (the StatefulSet's, when it changed): each event is a
// write to the apiserver, and creating a Memcached changes two or three
// objects at once.
func (s *scope) recordReports() {
	var notes []string
	var first report
	for _, c := range s.reports {
		if c.reason == "" {
			continue
		}
		if first.reason == "" {
			first = c
		}
		notes = append(notes, c.note)
	}
	if first.reason == "" {
		return
	}
	note := strings.Join(notes, "; ")
	note = strings.ToUpper(note[:1]) + note[1:]
	s.Recorder.Eventf(s.m, first.obj, corev1.EventTypeNormal, first.reason, eventActions[first.reason], "%s", note)
}

// boundedNotes records events whose notes are cut to what the events API
// accepts (eventNote), whatever they quote: a pod's termination message, an
// apiserver's error, a Secret's names.
type boundedNotes struct{ events.EventRecorder }

func (r boundedNotes) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, "%s", eventNote(fmt.Sprintf(note, args...)))
}

// podEvent records an event about one of the Memcached's pods, related to
// that pod. The recorder counts events alike in all but their note (the same
// reason and action, regarding the same version of the Memcached) as one
// series, written as one Event with the first one's note: without the pod,
// two slots resized within one version of the Memcached would be told as
// one slot's, twice.
func (s *scope) podEvent(p *owned.Pod, eventtype, reason, action, note string, args ...any) {
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID},
	}
	s.Recorder.Eventf(s.m, pod, eventtype, reason, action, note, args...)
}

// maxEventNote is the longest note the events API accepts, in bytes.
const maxEventNote = 1024

// eventNote is note cut to what the events API accepts, at a character
// boundary and marked as cut: a longer note is refused whole, and the event
// lost.
func eventNote(note string) string {
	if len(note) <= maxEventNote {
		return note
	}
	const more = " …"
	cut := maxEventNote - len(more)
	for cut > 0 && !utf8.RuneStart(note[cut]) {
		cut--
	}
	return note[:cut] + more
}
