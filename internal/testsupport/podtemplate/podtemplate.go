// Package podtemplate reads what the operator puts in its pods' template as
// the tests check it.
package podtemplate

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/example/memcached-operator/pkg/desired"
)

// MemcachedFlags is memcached's command line in pods of template: the
// container's command, and where memcached runs warm the settings its
// runner reads from the pod's annotation.
func MemcachedFlags(template corev1.PodTemplateSpec) []string {
	flags := slices.Clone(template.Spec.Containers[0].Command)
	if s := template.Annotations[desired.AnnotationMemcachedSettings]; s != "" {
		flags = append(flags, strings.Split(s, "\n")...)
	}
	return flags
}
