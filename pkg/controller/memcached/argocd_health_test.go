//go:build integration

package memcached_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	lua "github.com/yuin/gopher-lua"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/internal/testsupport/repo"
	"github.com/example/memcached-operator/internal/testsupport/testenv"
)

// The Argo CD health check that docs/install.md gives, run by the Lua
// engine Argo CD uses on Memcacheds the operator reports on: Healthy once
// available, Progressing while pods cannot start, Degraded when blocked.
func TestArgoCDHealthCheckOfTheInstallGuide(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	script := argoCDHealthScript(t)
	ns := testenv.Namespace(t, k8s)

	healthy := newMemcached(t, ns, "healthy", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)})
	converged(t, healthy)

	// No node has this label: the pods stay Pending.
	pending := newMemcached(t, ns, "pending", cachev1alpha1.MemcachedSpec{
		Size: ptr.To[int32](1), NodeSelector: map[string]cachev1alpha1.LabelValue{"memcached-operator.example.com/nowhere": "true"},
	})

	foreign := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "blocked", Labels: map[string]string{"app": "other"}},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "other"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example.com/other:1"}}},
			},
		},
	}
	g.Expect(k8s.Create(ctx, foreign)).To(Succeed())
	blocked := newMemcached(t, ns, "blocked", cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)})

	for _, tt := range []struct {
		m      *cachev1alpha1.Memcached
		status string
	}{
		{healthy, "Healthy"},
		{pending, "Progressing"},
		{blocked, "Degraded"},
	} {
		g.Eventually(func(g Gomega) {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(cachev1alpha1.SchemeGroupVersion.WithKind(cachev1alpha1.Kind))
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tt.m), u)).To(Succeed())
			g.Expect(u.Object).To(HaveKeyWithValue("status", HaveKey("conditions")), "the operator has reported")
			status, message, err := argoCDHealth(script, u.Object)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(status).To(Equal(tt.status), "%s: %s", tt.m.Name, message)
			g.Expect(message).NotTo(BeEmpty())
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), tt.m.Name)
	}
}

// argoCDHealthScript is the Lua health check of docs/install.md.
func argoCDHealthScript(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile(repo.Path("docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	const key = "resource.customizations.health.cache.example.com_Memcached: |\n"
	_, rest, ok := strings.Cut(string(doc), key)
	if !ok {
		t.Fatalf("docs/install.md has no %q", strings.TrimSpace(key))
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("the health check's code block does not end")
	}
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		lines = append(lines, strings.TrimPrefix(l, "    "))
	}
	return strings.Join(lines, "\n")
}

// argoCDHealth runs a health script as Argo CD does: the object as the
// global obj, the script's returned table read for status and message.
func argoCDHealth(script string, obj map[string]any) (string, string, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: false})
	defer l.Close()
	l.SetGlobal("obj", toLua(l, obj))
	if err := l.DoString(script); err != nil {
		return "", "", err
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return "", "", fmt.Errorf("the script returned %s, not a table", l.Get(-1).Type())
	}
	return lua.LVAsString(ret.RawGetString("status")), lua.LVAsString(ret.RawGetString("message")), nil
}

// toLua converts a value of an unstructured object to Lua, as Argo CD does.
func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := l.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(l, e))
		}
		return t
	case []any:
		t := l.NewTable()
		for _, e := range v {
			t.Append(toLua(l, e))
		}
		return t
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case nil:
		return lua.LNil
	}
	return lua.LString(fmt.Sprint(v))
}
