// Package v1alpha1 contains the v1alpha1 API of the cache.example.com group: the Memcached kind.
//
// +kubebuilder:object:generate=true
// +kubebuilder:ac:generate=true
// +kubebuilder:ac:output:package="../../applyconfig"
// +groupName=cache.example.com
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kind is the kind of a Memcached, as owner references name it.
const Kind = "Memcached"

var (
	// SchemeGroupVersion is the group and version of the objects in this package.
	SchemeGroupVersion = schema.GroupVersion{Group: "cache.example.com", Version: "v1alpha1"}

	// GroupVersion is SchemeGroupVersion, under the name kubebuilder projects use.
	GroupVersion = SchemeGroupVersion

	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this group and version to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &Memcached{}, &MemcachedList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
