//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/example/memcached-operator/pkg/desired"
)

// Foreign objects the story labels as the operator's: ConfigMaps of
// foreignData each, and pods carrying foreignData in an annotation.
const (
	foreignConfigMaps = 150
	foreignPods       = 100
	foreignData       = 600 << 10
	// foreignHeapBound bounds what they may add to the operator's heap: a
	// tenth of what they carry (about 150 MiB).
	foreignHeapBound = 15 << 20
)

// heapInUse is the operator's heap in use right after a garbage
// collection (asked through its pprof endpoint).
func heapInUse(t *testing.T) float64 {
	t.Helper()
	resp, err := http.Get("http://" + operator.PprofAddr + "/debug/pprof/heap?gc=1")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	v, err := operator.MetricSum("go_memstats_heap_inuse_bytes")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Anyone with ConfigMap or pod rights in a namespace can label objects as
// the operator's. Hundreds of them, carrying megabytes, cost the
// operator's memory next to nothing: it keeps of an object that is not a
// Memcached's a few hundred bytes.
func TestObjectsLabelledByOthersCostTheOperatorLittle(t *testing.T) {
	f := features.New("objects labelled by others cost the operator little").
		Assess("the operator's heap after hundreds of labelled ConfigMaps and pods", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			g, c := NewWithT(t), kube(t, cfg)
			ns := namespace(t, cfg, "foreign")
			before := heapInUse(t)
			labels := map[string]string{desired.LabelManagedBy: desired.ManagedBy}
			data := strings.Repeat("x", foreignData)
			for i := range foreignConfigMaps {
				cm := &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("c%d%s", i, desired.MembershipSuffix), Labels: labels},
					Data:       map[string]string{desired.MembershipKey: data},
				}
				g.Expect(c.Create(ctx, cm)).To(Succeed())
			}
			for i := range foreignPods {
				p := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("p%d", i), Labels: labels,
						Annotations: map[string]string{desired.AnnotationPodShape: "x", "data": data[:200<<10]}},
					Spec: corev1.PodSpec{
						// Pending for good: no node has the label.
						NodeSelector: map[string]string{"memcached-operator.example.com/nowhere": "true"},
						Containers:   []corev1.Container{{Name: "c", Image: "busybox"}},
					},
				}
				g.Expect(c.Create(ctx, p)).To(Succeed())
			}
			// The store's watches take them in: the operator's heap is
			// read after it had time to, and the largest of a few reads
			// is kept.
			time.Sleep(10 * time.Second)
			after := 0.0
			for range 3 {
				after = max(after, heapInUse(t))
				time.Sleep(2 * time.Second)
			}
			t.Logf("the operator's heap in use: %.1f MiB before, %.1f MiB after %d ConfigMaps and %d pods labelled as its own (%.0f MiB of data)",
				before/(1<<20), after/(1<<20), foreignConfigMaps, foreignPods, float64(foreignConfigMaps*foreignData+foreignPods*(200<<10))/(1<<20))
			g.Expect(after - before).To(BeNumerically("<", foreignHeapBound))
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}
