package owned

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/spec3"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// schemaTimeout bounds the wait for the apiserver to publish the schema of
// a ServiceMonitor CRD it already serves.
const schemaTimeout = 30 * time.Second

// Schemas type the objects the operator owns, so that apply
// configurations convert to field sets with list-map keys as the apiserver
// records them in managed fields: the built-in kinds with client-go's
// compiled-in schemas, and the Prometheus Operator's ServiceMonitors, when
// the cluster serves them, with the schema the apiserver publishes. That
// CRD is installed by another project, in a version the operator cannot
// know, so its schema is read when the operator starts (LearnSchemas).
//
// Schemas are an input of the rule that tells whether an apply is needed
// (applies.go): whatever summarizes or compares an object is given them.
type Schemas struct {
	builtin managedfields.TypeConverter
	// serviceMonitors is nil when the cluster serves no ServiceMonitors.
	serviceMonitors managedfields.TypeConverter
}

// BuiltinSchemas are the schemas of a cluster without ServiceMonitors.
func BuiltinSchemas() *Schemas {
	return &Schemas{builtin: applyconfigurations.NewTypeConverter(clientgoscheme.Scheme)}
}

// LearnSchemas reads from the apiserver whether it serves the Prometheus
// Operator's ServiceMonitors (monitoring.coreos.com/v1), and when it does,
// their schema. The operator calls it once, when it starts: a CRD
// installed later is seen at the next start.
func LearnSchemas(ctx context.Context, cfg *rest.Config, hc *http.Client) (*Schemas, error) {
	s := BuiltinSchemas()
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	gv := monitoringv1.SchemeGroupVersion
	resources, err := dc.ServerResourcesForGroupVersion(gv.String())
	switch {
	case apierrors.IsNotFound(err):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("discovering %s: %w", gv, err)
	}
	if !slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == monitoringv1.ServiceMonitorName }) {
		return s, nil
	}
	// The apiserver publishes a new CRD's schema a moment after serving it.
	var spec *spec3.OpenAPI
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, schemaTimeout, true, func(context.Context) (bool, error) {
		spec, last = openapi3.NewRoot(dc.OpenAPIV3()).GVSpec(gv)
		return last == nil, nil
	}); err != nil {
		return nil, fmt.Errorf("reading the OpenAPI schema of %s: %w (last: %v)", gv, err, last)
	}
	// Fields the schema does not declare (a CRD older than the client's
	// types) are kept rather than refused.
	if s.serviceMonitors, err = managedfields.NewTypeConverter(spec.Components.Schemas, true); err != nil {
		return nil, fmt.Errorf("reading the OpenAPI schema of %s: %w", gv, err)
	}
	return s, nil
}

// ServiceMonitors tells whether the cluster served ServiceMonitors when the
// schemas were read.
func (s *Schemas) ServiceMonitors() bool { return s.serviceMonitors != nil }

// Serves tells whether the cluster served d's kind when the schemas were
// read: a built-in kind always; a kind of a CRD (the ServiceMonitor, the
// only one the schemas learn) when its CRD was installed.
func (s *Schemas) Serves(d Descriptor) bool { return !d.ServedByCRD || s.ServiceMonitors() }

// ObjectToTyped types obj with its kind's schema.
func (s *Schemas) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	if obj.GetObjectKind().GroupVersionKind().Group != monitoringv1.SchemeGroupVersion.Group {
		return s.builtin.ObjectToTyped(obj, opts...)
	}
	if s.serviceMonitors == nil {
		return nil, fmt.Errorf("the schema of %s is unknown: the cluster had no ServiceMonitor CRD when the operator started", obj.GetObjectKind().GroupVersionKind())
	}
	return s.serviceMonitors.ObjectToTyped(obj, opts...)
}

// TypedToObject converts a typed value of a built-in kind back.
func (s *Schemas) TypedToObject(v *typed.TypedValue) (runtime.Object, error) {
	return s.builtin.TypedToObject(v)
}
