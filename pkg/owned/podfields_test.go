package owned

import (
	"reflect"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	"github.com/example/memcached-operator/pkg/desired"
)

// What a change of each field of the pod costs is what the table says:
// the rollout replaces, restarts or patches by it, and the status tells
// beforehand which.
func TestChangesCostWhatTheTableSays(t *testing.T) {
	template := func(image, exporter, settings, cpu string) *corev1ac.PodTemplateSpecApplyConfiguration {
		return corev1ac.PodTemplateSpec().
			WithAnnotations(map[string]string{desired.AnnotationPodShape: "s1", desired.AnnotationMemcachedSettings: settings}).
			WithSpec(corev1ac.PodSpec().
				WithContainers(
					corev1ac.Container().WithName(desired.ContainerName).WithImage(image).
						WithResources(corev1ac.ResourceRequirements().WithLimits(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)})),
					corev1ac.Container().WithName("exporter").WithImage(exporter)).
				WithVolumes(corev1ac.Volume().WithName(desired.MemoryVolumeName).WithEmptyDir(corev1ac.EmptyDirVolumeSource().WithSizeLimit(resource.MustParse("64Mi")))))
	}
	cpu := func(q string) corev1.ResourceRequirements {
		l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
		return corev1.ResourceRequirements{Limits: l, Requests: l}
	}
	pod := func(change func(*Pod)) *Pod {
		volume := resource.MustParse("64Mi")
		p := &Pod{Shape: "s1", Ready: true, MemcachedID: "containerd://1", MemoryVolume: &volume, Resources: cpu("1"),
			Annotations: map[string]string{desired.AnnotationMemcachedSettings: "--threads=2"},
			Images:      []ContainerImage{{Name: desired.ContainerName, Image: "memcached:1"}, {Name: "exporter", Image: "exporter:1"}}}
		if change != nil {
			change(p)
		}
		return p
	}
	same := template("memcached:1", "exporter:1", "--threads=2", "1")
	tests := []struct {
		name     string
		pod      *Pod
		template *corev1ac.PodTemplateSpecApplyConfiguration
		field    string
		cost     Cost
	}{
		{"nothing", pod(nil), same, "", Free},
		{"another shape", pod(func(p *Pod) { p.Shape = "s0" }), same, FieldShape, Replacement},
		{"no shape", pod(func(p *Pod) { p.Shape = "" }), same, FieldShape, Replacement},
		{"a smaller memory volume", pod(func(p *Pod) { small := resource.MustParse("32Mi"); p.MemoryVolume = &small }), same, FieldMemoryVolume, Replacement},
		{"more CPU", pod(nil), template("memcached:1", "exporter:1", "--threads=2", "2"), FieldResources, Free},
		{"a resource left out", pod(func(p *Pod) { p.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1Gi") }), same, FieldResources, Replacement},
		{"another's container", pod(func(p *Pod) { p.Images = append(p.Images, ContainerImage{Name: "sidecar", Image: "x"}) }), same, FieldContainers, Replacement},
		{"memcached's image", pod(nil), template("memcached:2", "exporter:1", "--threads=2", "1"), FieldMemcachedImage, WarmRestart},
		{"memcached's image on a node that names no container", pod(func(p *Pod) { p.MemcachedID = "" }), template("memcached:2", "exporter:1", "--threads=2", "1"), FieldMemcachedImage, Replacement},
		{"the exporter's image", pod(nil), template("memcached:1", "exporter:2", "--threads=2", "1"), FieldOtherImages, Free},
		{"threads", pod(nil), template("memcached:1", "exporter:1", "--threads=4", "1"), FieldSettings, WarmRestart},
		{"the maximum item size", pod(nil), template("memcached:1", "exporter:1", "--threads=2\n--max-item-size=2097152", "1"), FieldSettings, EmptyRestart},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			changes := Changes(tt.pod, tt.template)
			c := Costliest(changes)
			g.Expect(c.Cost).To(Equal(tt.cost), "%+v", changes)
			if tt.field != "" {
				g.Expect(Changed(changes, tt.field)).To(BeTrue(), "%+v", changes)
			} else {
				g.Expect(changes).To(BeEmpty())
			}
			if c.Cost > WarmRestart {
				g.Expect(c.Why).NotTo(BeEmpty(), "a restart empty or a replacement says why")
			}
		})
	}
}

// Every field the table reads off a pod is kept in its summary, and of a
// pod being deleted only those the table reads while deleting.
func TestSummaryReadsEveryFieldOfTheTable(t *testing.T) {
	now := metav1.Now()
	full := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "c-0", Namespace: "ns",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "c", UID: "u", Controller: ptr.To(true)}},
			Labels:          map[string]string{appsv1.ControllerRevisionHashLabelKey: "r1"},
			Annotations: map[string]string{desired.AnnotationPodShape: "s1", desired.AnnotationMemcachedSettings: "--threads=2",
				desired.AnnotationRestartingFrom: "containerd://0", desired.AnnotationMembershipVersion: "3",
				desired.AnnotationMembershipSeal: "seal", desired.AnnotationMembershipRetold: "4 copy 1", desired.AnnotationSecretsDigest: "d"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: desired.ContainerName, Image: "memcached:1",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}},
			Volumes: []corev1.Volume{{Name: desired.MemoryVolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("64Mi"))}}}},
		},
		Status: corev1.PodStatus{
			Conditions: []corev1.PodCondition{{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: desired.ContainerName, ContainerID: "containerd://1",
				Resources: &corev1.ResourceRequirements{}}},
		},
	}
	deleting := full.DeepCopy()
	deleting.DeletionTimestamp = &now
	for _, tt := range []struct {
		pod      *corev1.Pod
		deleting bool
	}{{full, false}, {deleting, true}} {
		s := reflect.ValueOf(SummarizePod(tt.pod)).Elem()
		for _, f := range PodFields {
			for name := range strings.SplitSeq(f.ReadAs, ", ") {
				name, _, _ = strings.Cut(name, "[")
				v := s.FieldByName(name)
				if !v.IsValid() {
					t.Fatalf("%s: Pod has no field %s", f.Name, name)
				}
				if want := !tt.deleting || f.ReadWhileDeleting; v.IsZero() == want {
					t.Errorf("%s (deleting %v): %s read %v, want %v", f.Name, tt.deleting, name, !v.IsZero(), want)
				}
			}
		}
	}
}
