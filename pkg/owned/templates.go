package owned

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/example/memcached-operator/pkg/desired"
)

// TemplateImages are the images of template's containers, by
// ContainerImage.Key.
func TemplateImages(template *corev1ac.PodTemplateSpecApplyConfiguration) map[string]string {
	images := map[string]string{}
	spec := template.Spec
	if spec == nil {
		return images
	}
	for _, c := range spec.InitContainers {
		images[ContainerImage{Name: *c.Name, Init: true}.Key()] = *c.Image
	}
	for _, c := range spec.Containers {
		images[ContainerImage{Name: *c.Name}.Key()] = *c.Image
	}
	return images
}

// TemplateResources are the resources of template's memcached container,
// as the apiserver defaults them on a pod: a limit without a request is
// the request too.
func TemplateResources(template *corev1ac.PodTemplateSpecApplyConfiguration) corev1.ResourceRequirements {
	var r corev1.ResourceRequirements
	if template.Spec == nil {
		return r
	}
	for _, c := range template.Spec.Containers {
		if c.Name == nil || *c.Name != desired.ContainerName || c.Resources == nil {
			continue
		}
		if c.Resources.Limits != nil {
			r.Limits = maps.Clone(*c.Resources.Limits)
		}
		if c.Resources.Requests != nil {
			r.Requests = maps.Clone(*c.Resources.Requests)
		}
	}
	for name, q := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			if r.Requests == nil {
				r.Requests = corev1.ResourceList{}
			}
			r.Requests[name] = q
		}
	}
	return r
}

// SameCPUAndMemory tells whether a and b ask for the same CPU and memory,
// which is what a resize in place changes.
func SameCPUAndMemory(a, b corev1.ResourceRequirements) bool {
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		for _, l := range [][2]corev1.ResourceList{{a.Requests, b.Requests}, {a.Limits, b.Limits}} {
			x, inX := l[0][name]
			y, inY := l[1][name]
			if inX != inY || (inX && x.Cmp(y) != 0) {
				return false
			}
		}
	}
	return true
}

// removesResources tells whether want leaves out a request or limit that
// have sets, or changes another resource than CPU and memory: no resize
// in place can.
func removesResources(have, want corev1.ResourceRequirements) bool {
	for _, l := range [][2]corev1.ResourceList{{have.Requests, want.Requests}, {have.Limits, want.Limits}} {
		for name, q := range l[0] {
			w, ok := l[1][name]
			if !ok {
				return true
			}
			if name != corev1.ResourceCPU && name != corev1.ResourceMemory && q.Cmp(w) != 0 {
				return true
			}
		}
		for name := range l[1] {
			if _, ok := l[0][name]; !ok && name != corev1.ResourceCPU && name != corev1.ResourceMemory {
				return true
			}
		}
	}
	return false
}
