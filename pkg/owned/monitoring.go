package owned

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	monitoringv1ac "github.com/prometheus-operator/prometheus-operator/pkg/client/applyconfiguration/monitoring/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/spec3"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// The Prometheus Operator's ServiceMonitor is the one kind the operator
// owns whose schema is not compiled in: its CRD is installed by another
// project, in a version the operator cannot know. Field sets of
// ServiceMonitors must nevertheless be computed as the apiserver computes
// them (metadata.ownerReferences keyed by uid, for one), so their schema is
// read from the apiserver's OpenAPI when the operator starts.

// schemaTimeout bounds the wait for the apiserver to publish the schema of
// a ServiceMonitor CRD it already serves.
const schemaTimeout = 30 * time.Second

// monitoringTypes types ServiceMonitors once LearnServiceMonitors has read
// their schema; nil before, and in a cluster without them.
var monitoringTypes atomic.Pointer[managedfields.TypeConverter]

// LearnServiceMonitors tells whether the cluster serves the Prometheus
// Operator's ServiceMonitors (monitoring.coreos.com/v1), and when it does,
// reads their schema from the apiserver's OpenAPI for the digests and field
// sets of ServiceMonitors. The operator calls it once, when it starts: a
// CRD installed later is seen at the next start.
func LearnServiceMonitors(ctx context.Context, cfg *rest.Config, hc *http.Client) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, hc)
	if err != nil {
		return false, err
	}
	gv := monitoringv1.SchemeGroupVersion
	resources, err := dc.ServerResourcesForGroupVersion(gv.String())
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("discovering %s: %w", gv, err)
	}
	if !slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == monitoringv1.ServiceMonitorName }) {
		return false, nil
	}
	// The apiserver publishes a new CRD's schema a moment after serving it.
	var spec *spec3.OpenAPI
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, schemaTimeout, true, func(context.Context) (bool, error) {
		spec, last = openapi3.NewRoot(dc.OpenAPIV3()).GVSpec(gv)
		return last == nil, nil
	}); err != nil {
		return false, fmt.Errorf("reading the OpenAPI schema of %s: %w (last: %v)", gv, err, last)
	}
	// Fields the schema does not declare (a CRD older than the client's
	// types) are kept rather than refused.
	tc, err := managedfields.NewTypeConverter(spec.Components.Schemas, true)
	if err != nil {
		return false, fmt.Errorf("reading the OpenAPI schema of %s: %w", gv, err)
	}
	monitoringTypes.Store(&tc)
	return true, nil
}

// kindTypes types the objects the operator owns: the built-in kinds with
// client-go's compiled-in schemas, ServiceMonitors with the schema
// LearnServiceMonitors read.
type kindTypes struct {
	builtin managedfields.TypeConverter
}

func (k kindTypes) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	if obj.GetObjectKind().GroupVersionKind().Group != monitoringv1.SchemeGroupVersion.Group {
		return k.builtin.ObjectToTyped(obj, opts...)
	}
	tc := monitoringTypes.Load()
	if tc == nil {
		return nil, fmt.Errorf("the schema of %s is unknown: the cluster had no ServiceMonitor CRD when the operator started", obj.GetObjectKind().GroupVersionKind())
	}
	return (*tc).ObjectToTyped(obj, opts...)
}

func (k kindTypes) TypedToObject(v *typed.TypedValue) (runtime.Object, error) {
	return k.builtin.TypedToObject(v)
}

// extractServiceMonitor is what FieldManager owns of sm, as an apply
// configuration: what client-go's generated Extract functions give for the
// built-in kinds, which the Prometheus Operator's client does not generate.
func extractServiceMonitor(sm *monitoringv1.ServiceMonitor) (*monitoringv1ac.ServiceMonitorApplyConfiguration, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(sm)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{Object: u}
	obj.SetGroupVersionKind(monitoringv1.SchemeGroupVersion.WithKind(monitoringv1.ServiceMonitorsKind))
	tv, err := typeConverter.ObjectToTyped(obj, typed.AllowDuplicates)
	if err != nil {
		return nil, err
	}
	ac := &monitoringv1ac.ServiceMonitorApplyConfiguration{}
	for _, e := range sm.GetManagedFields() {
		if !isOwnApply(e) {
			continue
		}
		fields, err := fieldSet(e)
		if err != nil {
			return nil, err
		}
		extracted, ok := tv.ExtractItems(fields.Leaves()).AsValue().Unstructured().(map[string]any)
		if !ok {
			return nil, fmt.Errorf("extracting the operator's fields of ServiceMonitor %s: not an object", sm.Name)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(extracted, ac); err != nil {
			return nil, err
		}
	}
	// Managed fields never hold the type and identity; an apply
	// configuration always does.
	return ac.WithKind(monitoringv1.ServiceMonitorsKind).
		WithAPIVersion(monitoringv1.SchemeGroupVersion.String()).
		WithName(sm.Name).
		WithNamespace(sm.Namespace), nil
}
