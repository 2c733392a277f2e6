// Package tutorial writes what the Operator SDK tutorial's memcached operator
// writes to a cluster, for tests of taking over from it: its CRD, and for
// each Memcached its finalizer, its Deployment (created, not applied) and
// its status (updated, not applied), all under its field manager. It is a
// fixture built from the objects that operator leaves in a cluster, not a
// copy of its code.
package tutorial

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

// CRD is the tutorial's Memcached CRD, in YAML.
//
//go:embed crd.yaml
var CRD []byte

// FieldManager is the field manager the tutorial's operator writes with:
// its binary's name.
const FieldManager = "manager"

// Finalizer is the finalizer it puts on every Memcached.
const Finalizer = "cache.example.com/finalizer"

// Labels are the labels of every Deployment and pod it makes, and its
// Deployments' selector: the same for every Memcached (its defect: two
// Memcacheds in a namespace select each other's pods).
func Labels(image string) map[string]string {
	tag := ""
	if i := strings.LastIndex(image, ":"); i >= 0 {
		tag = image[i+1:]
	}
	return map[string]string{
		"app.kubernetes.io/name":       "memcached-operator",
		"app.kubernetes.io/version":    tag,
		"app.kubernetes.io/managed-by": "MemcachedController",
	}
}

// Deployment is the Deployment it makes for m with image.
func Deployment(m *cachev1alpha1.Memcached, image string) *appsv1.Deployment {
	ls := Labels(image)
	port := int32(11211)
	if m.Spec.ContainerPort != nil {
		port = *m.Spec.ContainerPort
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: m.Name, Namespace: m.Namespace,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: cachev1alpha1.SchemeGroupVersion.String(), Kind: cachev1alpha1.Kind,
				Name: m.Name, UID: m.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: m.Spec.Size,
			Selector: &metav1.LabelSelector{MatchLabels: ls},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: ls},
				Spec: corev1.PodSpec{
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:            "memcached",
						Image:           image,
						ImagePullPolicy: corev1.PullIfNotPresent,
						SecurityContext: &corev1.SecurityContext{
							RunAsNonRoot:             ptr.To(true),
							RunAsUser:                ptr.To[int64](1001),
							AllowPrivilegeEscalation: ptr.To(false),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
						Ports:   []corev1.ContainerPort{{ContainerPort: port, Name: "memcached"}},
						Command: []string{"memcached", "-m=64", "-o", "modern", "-v"},
					}},
				},
			},
		},
	}
}

// Reconcile does to m, which must exist, what the tutorial's operator does:
// it adds its finalizer, creates m's Deployment with image and reports it
// in m's status, each with a read-modify-write under FieldManager. It
// returns the Deployment.
func Reconcile(ctx context.Context, c client.Client, m *cachev1alpha1.Memcached, image string) (*appsv1.Deployment, error) {
	if err := c.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
		return nil, err
	}
	d := Deployment(m, image)
	return d, ReconcileWith(ctx, c, m, d)
}

// ReconcileWith is Reconcile with d, m's Deployment as the tutorial makes
// it (see Deployment), changed as a test needs.
func ReconcileWith(ctx context.Context, c client.Client, m *cachev1alpha1.Memcached, d *appsv1.Deployment) error {
	owner := client.FieldOwner(FieldManager)
	if err := c.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
		return err
	}
	if !slices.Contains(m.Finalizers, Finalizer) {
		m.Finalizers = append(m.Finalizers, Finalizer)
		if err := c.Update(ctx, m, owner); err != nil {
			return fmt.Errorf("adding the finalizer: %w", err)
		}
	}
	if err := c.Create(ctx, d, owner); err != nil {
		return fmt.Errorf("creating the Deployment: %w", err)
	}
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{
		Type: "Available", Status: metav1.ConditionTrue, Reason: "Reconciling",
		Message: fmt.Sprintf("Deployment for custom resource (%s) with %d replicas created successfully", m.Name, *d.Spec.Replicas),
	})
	if err := c.Status().Update(ctx, m, owner); err != nil {
		return fmt.Errorf("updating the status: %w", err)
	}
	return nil
}

// ReadyPods are the ready pods, among pods, of the Memcached name: those of
// its Deployment's ReplicaSets (the tutorial's, or the operator's before
// slots) and of its StatefulSet.
func ReadyPods(pods []corev1.Pod, name string) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		ref := metav1.GetControllerOf(&p)
		if ref == nil || p.DeletionTimestamp != nil {
			continue
		}
		if !(ref.Kind == "ReplicaSet" && strings.HasPrefix(ref.Name, name+"-")) && !(ref.Kind == "StatefulSet" && ref.Name == name) {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				out = append(out, p)
			}
		}
	}
	return out
}
