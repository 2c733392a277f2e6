//go:build integration

// Package v1alpha1_test checks the generated Memcached CRD the way users meet it:
// installed in a real kube-apiserver, admitting good objects with their
// defaults and refusing bad ones with a message a person understands.
package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Run(m, &env) }

func memcached(ns, name string, spec cachev1alpha1.MemcachedSpec) *cachev1alpha1.Memcached {
	return &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       spec,
	}
}

func TestCRDIsEstablished(t *testing.T) {
	g := NewWithT(t)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: "memcacheds.cache.example.com"}, crd)).To(Succeed())
	g.Expect(crd.Spec.Scope).To(Equal(apiextensionsv1.NamespaceScoped))
	g.Expect(crd.Spec.Names.ShortNames).To(ConsistOf("mc"))
	established := false
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			established = true
		}
	}
	g.Expect(established).To(BeTrue(), "CRD is not Established")
}

func TestPrinterColumns(t *testing.T) {
	g := NewWithT(t)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: "memcacheds.cache.example.com"}, crd)).To(Succeed())
	g.Expect(crd.Spec.Versions).To(HaveLen(1))
	columns := map[string]apiextensionsv1.CustomResourceColumnDefinition{}
	for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
		columns[c.Name] = c
	}
	g.Expect(columns).To(HaveKey("Desired"))
	g.Expect(columns["Desired"].JSONPath).To(Equal(".spec.size"))
	g.Expect(columns).To(HaveKey("Ready"))
	g.Expect(columns["Ready"].JSONPath).To(Equal(".status.readyReplicas"))
	g.Expect(columns).To(HaveKey("Available"))
	g.Expect(columns["Available"].JSONPath).To(Equal(`.status.conditions[?(@.type=="Available")].status`))
	g.Expect(columns).To(HaveKey("Age"))
	g.Expect(columns).To(HaveKey("Image"))
	g.Expect(columns["Image"].Priority).To(Equal(int32(1)), "image is shown with -o wide only")
	g.Expect(columns["Image"].JSONPath).To(Equal(".status.image"), "the image in use, also when spec.image is unset")
	g.Expect(columns).To(HaveKey("Autoscaling"))
	g.Expect(columns["Autoscaling"].JSONPath).To(Equal(".status.autoscaling.next"))
	g.Expect(columns["Autoscaling"].Priority).To(Equal(int32(1)))
}

func TestDefaultsAreApplied(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client)

	mc := memcached(ns, "defaults", cachev1alpha1.MemcachedSpec{})
	g.Expect(env.Client.Create(ctx, mc)).To(Succeed())

	got := &cachev1alpha1.Memcached{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(mc), got)).To(Succeed())
	g.Expect(got.Spec.Size).To(Equal(ptr.To[int32](1)))
	g.Expect(got.Spec.ContainerPort).To(Equal(ptr.To[int32](11211)))
	g.Expect(got.Spec.Image).To(BeEmpty(), "the operator's default image is not written into the spec")
	g.Expect(got.Spec.MemoryLimitMiB).To(BeNil())
}

// A Memcached the operator has not written a status for yet is in
// progress to kstatus (Flux, kpt, the cli-utils applier): with no
// status at all kstatus would call it current before any pod exists.
func TestANewMemcachedReadsAsInProgress(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client)

	mc := memcached(ns, "fresh", cachev1alpha1.MemcachedSpec{})
	g.Expect(env.Client.Create(ctx, mc)).To(Succeed())

	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(cachev1alpha1.GroupVersion.WithKind(cachev1alpha1.Kind))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(mc), u)).To(Succeed())
	observed, found, err := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue(), "status.observedGeneration is defaulted")
	g.Expect(observed).To(BeZero())
	res, err := kstatus.Compute(u)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Status).To(Equal(kstatus.InProgressStatus), res.Message)

	// Once a status names the generation (the operator's apply), it is what
	// the object says.
	got := &cachev1alpha1.Memcached{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(mc), got)).To(Succeed())
	got.Status.ObservedGeneration = got.Generation
	g.Expect(env.Client.Status().Update(ctx, got)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(mc), u)).To(Succeed())
	res, err = kstatus.Compute(u)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Status).To(Equal(kstatus.CurrentStatus), res.Message)
}

func TestValidObjectRoundTrips(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client)

	spec := cachev1alpha1.MemcachedSpec{
		Size:           ptr.To[int32](3),
		ContainerPort:  ptr.To[int32](11311),
		Image:          "registry.example.com:5000/cache/memcached:1.6.38-alpine",
		MemoryLimitMiB: ptr.To[int32](256),
		MaxConnections: ptr.To[int32](4096),
		Threads:        ptr.To[int32](8),
		Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("300Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("300Mi")},
		},
	}
	mc := memcached(ns, "full", spec)
	g.Expect(env.Client.Create(ctx, mc)).To(Succeed())

	got := &cachev1alpha1.Memcached{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(mc), got)).To(Succeed())
	g.Expect(got.Spec.Size).To(Equal(spec.Size))
	g.Expect(got.Spec.ContainerPort).To(Equal(spec.ContainerPort))
	g.Expect(got.Spec.Image).To(Equal(spec.Image))
	g.Expect(got.Spec.MemoryLimitMiB).To(Equal(spec.MemoryLimitMiB))
	g.Expect(got.Spec.MaxConnections).To(Equal(spec.MaxConnections))
	g.Expect(got.Spec.Threads).To(Equal(spec.Threads))
	g.Expect(got.Spec.Resources.Limits.Memory().String()).To(Equal("300Mi"))
}

func TestValidImagesAreAccepted(t *testing.T) {
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client)
	images := []string{
		"memcached",
		"memcached:1.6.38",
		"docker.io/library/memcached:1.6",
		"localhost:5000/memcached:latest",
		"ghcr.io/org/team/memcached_exporter:v0.15.0",
		"memcached@sha256:" + strings.Repeat("a1", 32),
		"registry.example.com/memcached:1.6@sha256:" + strings.Repeat("0f", 32),
	}
	for i, image := range images {
		t.Run(image, func(t *testing.T) {
			mc := memcached(ns, "image-"+string(rune('a'+i)), cachev1alpha1.MemcachedSpec{Image: image})
			NewWithT(t).Expect(env.Client.Create(ctx, mc)).To(Succeed())
		})
	}
}

func TestInvalidObjectsAreRejected(t *testing.T) {
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client)
	tests := []struct {
		name    string
		spec    cachev1alpha1.MemcachedSpec
		message string
	}{
		{"negative size", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](-1)}, "spec.size: Invalid value: -1: spec.size in body should be greater than or equal to 0"},
		{"huge size", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1000)}, "spec.size in body should be less than or equal to 100"},
		{"port zero", cachev1alpha1.MemcachedSpec{ContainerPort: ptr.To[int32](0)}, "spec.containerPort in body should be greater than or equal to 1"},
		{"port 70000", cachev1alpha1.MemcachedSpec{ContainerPort: ptr.To[int32](70000)}, "spec.containerPort in body should be less than or equal to 65535"},
		{"image with spaces", cachev1alpha1.MemcachedSpec{Image: "memcached 1.6"}, "image must be a container image reference"},
		{"image with upper case", cachev1alpha1.MemcachedSpec{Image: "Memcached:1.6"}, "image must be a container image reference"},
		{"image with a bad digest", cachev1alpha1.MemcachedSpec{Image: "memcached@sha256:abc"}, "image must be a container image reference"},
		{"image with an empty tag", cachev1alpha1.MemcachedSpec{Image: "memcached:"}, "image must be a container image reference"},
		{"image too long", cachev1alpha1.MemcachedSpec{Image: strings.Repeat("a", 600)}, "spec.image: Too long"},
		{"memory limit too small", cachev1alpha1.MemcachedSpec{MemoryLimitMiB: ptr.To[int32](1)}, "spec.memoryLimitMiB in body should be greater than or equal to 8"},
		{"memory limit too large", cachev1alpha1.MemcachedSpec{MemoryLimitMiB: ptr.To[int32](100000)}, "spec.memoryLimitMiB in body should be less than or equal to 65536"},
		{"too few connections", cachev1alpha1.MemcachedSpec{MaxConnections: ptr.To[int32](1)}, "spec.maxConnections in body should be greater than or equal to 16"},
		{"zero threads", cachev1alpha1.MemcachedSpec{Threads: ptr.To[int32](0)}, "spec.threads in body should be greater than or equal to 1"},
		{"too many threads", cachev1alpha1.MemcachedSpec{Threads: ptr.To[int32](65)}, "spec.threads in body should be less than or equal to 64"},
		{"autoscaling without key moves", cachev1alpha1.MemcachedSpec{Autoscaling: &cachev1alpha1.AutoscalingSpec{MinSize: 1, MaxSize: 3}},
			"autoscaling needs keyMoves: each step it takes moves keys"},
		{"autoscaling's bounds crossed", cachev1alpha1.MemcachedSpec{KeyMoves: &cachev1alpha1.KeyMovesSpec{Ring: "node"}, Autoscaling: &cachev1alpha1.AutoscalingSpec{MinSize: 3, MaxSize: 2}},
			"maxSize must be at least minSize"},
		{"autoscaling's scale-down window under a minute", cachev1alpha1.MemcachedSpec{KeyMoves: &cachev1alpha1.KeyMovesSpec{Ring: "node"}, Autoscaling: &cachev1alpha1.AutoscalingSpec{MinSize: 1, MaxSize: 2, ScaleDownSeconds: ptr.To[int32](30)}},
			"spec.autoscaling.scaleDownSeconds in body should be greater than or equal to 60"},
		{"autoscaling's hit ratio loss over the whole", cachev1alpha1.MemcachedSpec{KeyMoves: &cachev1alpha1.KeyMovesSpec{Ring: "node"}, Autoscaling: &cachev1alpha1.AutoscalingSpec{MinSize: 1, MaxSize: 2, MaxHitRatioLossPermille: ptr.To[int32](1001)}},
			"spec.autoscaling.maxHitRatioLossPermille in body should be less than or equal to 1000"},
		{"key moves slower than a thousand keys a second", cachev1alpha1.MemcachedSpec{KeyMoves: &cachev1alpha1.KeyMovesSpec{Ring: "node", KeysPerSecond: ptr.To[int32](999)}},
			"spec.keyMoves.keysPerSecond in body should be greater than or equal to 1000"},
		{"key moves faster than a million keys a second", cachev1alpha1.MemcachedSpec{KeyMoves: &cachev1alpha1.KeyMovesSpec{Ring: "node", KeysPerSecond: ptr.To[int32](1000001)}},
			"spec.keyMoves.keysPerSecond in body should be less than or equal to 1000000"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			mc := memcached(ns, "invalid-"+string(rune('a'+i)), tt.spec)
			err := env.Client.Create(ctx, mc)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tt.message))
		})
	}
}

// TestNamesThatCannotNameAServiceAreRejected: a Memcached's name is also its
// Service's, which must be a DNS-1035 label; the apiserver alone would admit
// any DNS subdomain.
func TestNamesThatCannotNameAServiceAreRejected(t *testing.T) {
	ns := testenv.Namespace(t, env.Client)
	tests := []struct {
		name    string
		message string // empty: admitted
	}{
		{strings.Repeat("a", 64), "metadata.name must be at most 63 characters"},
		{"cache.with.dots", "no dots"},
		{"1cache", "must start with a lowercase letter"},
		{strings.Repeat("a", 63), ""},
		{"cache-1", ""},
		{"c", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := env.Client.Create(context.Background(), memcached(ns, tt.name, cachev1alpha1.MemcachedSpec{}))
			if tt.message == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tt.message))
		})
	}
}

func TestEmptyImageIsRejected(t *testing.T) {
	g := NewWithT(t)
	ns := testenv.Namespace(t, env.Client)
	// An empty string is dropped by omitempty in Go, so send it as JSON.
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
		"metadata": map[string]any{"name": "empty-image", "namespace": ns},
		"spec":     map[string]any{"image": ""},
	}}
	err := env.Client.Create(context.Background(), u)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec.image in body should be at least 1 chars long"))
}

func TestUnknownFieldsAreRejected(t *testing.T) {
	g := NewWithT(t)
	ns := testenv.Namespace(t, env.Client)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
		"metadata": map[string]any{"name": "unknown-field", "namespace": ns},
		"spec":     map[string]any{"sise": int64(3)},
	}}
	err := env.Client.Create(context.Background(), u, client.FieldValidation(metav1.FieldValidationStrict))
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring(`unknown field "spec.sise"`))
}

func TestScaleSubresource(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client)

	mc := memcached(ns, "scaled", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)})
	g.Expect(env.Client.Create(ctx, mc)).To(Succeed())

	// What `kubectl scale memcached/scaled --replicas=3` does.
	scale := &autoscalingv1.Scale{}
	g.Expect(env.Client.SubResource("scale").Get(ctx, mc, scale)).To(Succeed())
	g.Expect(scale.Spec.Replicas).To(Equal(int32(1)))
	scale.Spec.Replicas = 3
	g.Expect(env.Client.SubResource("scale").Update(ctx, mc, client.WithSubResourceBody(scale))).To(Succeed())

	got := &cachev1alpha1.Memcached{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(mc), got)).To(Succeed())
	g.Expect(got.Spec.Size).To(Equal(ptr.To[int32](3)))

	// The scale subresource reports the status replicas and selector an HPA reads.
	got.Status.Replicas = 2
	got.Status.Selector = "app.kubernetes.io/instance=scaled"
	g.Expect(env.Client.Status().Update(ctx, got)).To(Succeed())
	g.Expect(env.Client.SubResource("scale").Get(ctx, mc, scale)).To(Succeed())
	g.Expect(scale.Status.Replicas).To(Equal(int32(2)))
	g.Expect(scale.Status.Selector).To(Equal("app.kubernetes.io/instance=scaled"))

	// The scale subresource is bound by the same validation.
	scale.Spec.Replicas = 500
	err := env.Client.SubResource("scale").Update(ctx, mc, client.WithSubResourceBody(scale))
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
}

// The CRD's bound on spec.size is MaxSize, which the operator holds its
// StatefulSets to.
func TestTheCRDBoundsTheSizeAtMaxSize(t *testing.T) {
	g := NewWithT(t)
	ns := testenv.Namespace(t, env.Client)
	g.Expect(env.Client.Create(context.Background(), memcached(ns, "largest", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](cachev1alpha1.MaxSize)}))).To(Succeed())
	err := env.Client.Create(context.Background(), memcached(ns, "larger", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](cachev1alpha1.MaxSize + 1)}))
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
}
