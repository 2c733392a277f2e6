package memcached

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/secrets"
	"github.com/example/memcached-operator/pkg/status"
)

// secretsPendingRecheck is how soon a Memcached whose Secrets' watches
// have not listed yet is looked at again. Their first answer reconciles it
// at once; this is the safety net.
const secretsPendingRecheck = 5 * time.Second

// errSecretsPending: a Secret the Memcached names has not been listed yet,
// so what its pods would mount is not known.
var errSecretsPending = errors.New("the Secrets' watches have not listed yet")

// mountedSecrets is what a Memcached's pods would mount from the Secrets
// it names: the digests of their content, or why they cannot.
type mountedSecrets struct {
	digests desired.SecretDigests
	problem *status.SecretProblem
}

// mountedSecrets records which Secrets m names (the watcher follows those
// and no others) and tells what m's pods would mount from them.
func (r *Reconciler) mountedSecrets(m *cachev1alpha1.Memcached) (mountedSecrets, error) {
	var names []string
	if m.Spec.TLS != nil {
		names = append(names, m.Spec.TLS.SecretName)
	}
	if m.Spec.Auth != nil && !slices.Contains(names, m.Spec.Auth.SecretName) {
		names = append(names, m.Spec.Auth.SecretName)
	}
	r.Secrets.Use(client.ObjectKeyFromObject(m), names...)

	var out mountedSecrets
	var err error
	if tls := m.Spec.TLS; tls != nil {
		uses := []secrets.Use{secrets.UseServing}
		if slices.Contains(desired.TLSKeys(m), secrets.CAKey) {
			uses = append(uses, secrets.UseClientCA)
			if desired.Monitored(m) {
				uses = append(uses, secrets.UseClient)
			}
		}
		out.digests.TLS, out.problem, err = r.secretDigest(m, tls.SecretName, desired.TLSKeys(m), uses)
		if err != nil || out.problem != nil {
			return out, err
		}
	}
	if auth := m.Spec.Auth; auth != nil {
		key := desired.AuthKey(m)
		out.digests.Auth, out.problem, err = r.secretDigest(m, auth.SecretName, []string{key}, []secrets.Use{secrets.UseAuthFile(key)})
	}
	return out, err
}

// secretDigest is the digest of the keys of m's Secret name, when it
// holds them and they are fit for uses; otherwise the problem.
func (r *Reconciler) secretDigest(m *cachev1alpha1.Memcached, name string, keys []string, uses []secrets.Use) (string, *status.SecretProblem, error) {
	st := r.Secrets.Get(types.NamespacedName{Namespace: m.Namespace, Name: name})
	switch {
	case !st.Synced && st.Err != nil:
		return "", &status.SecretProblem{
			Reason:  cachev1alpha1.ReasonSecretUnreadable,
			Message: fmt.Sprintf("Secret %s cannot be read: %v", name, st.Err),
		}, nil
	case !st.Synced:
		return "", nil, errSecretsPending
	case st.Summary == nil:
		return "", &status.SecretProblem{
			Reason:  cachev1alpha1.ReasonSecretMissing,
			Message: fmt.Sprintf("Secret %s does not exist; the Deployment is held as it is until it does", name),
		}, nil
	}
	if missing := st.Summary.Missing(keys...); len(missing) > 0 {
		return "", &status.SecretProblem{
			Reason:  cachev1alpha1.ReasonSecretMissing,
			Message: fmt.Sprintf("Secret %s has no key %s; the Deployment is held as it is until it does", name, strings.Join(missing, ", ")),
		}, nil
	}
	for _, u := range uses {
		if p, ok := st.Summary.Problems[u]; ok {
			return "", &status.SecretProblem{
				Reason:  cachev1alpha1.ReasonSecretInvalid,
				Message: fmt.Sprintf("Secret %s cannot serve as %s: %s; the Deployment is held as it is until it can", name, u, p),
			}, nil
		}
	}
	return st.Summary.Digest(keys...), nil, nil
}

// reportSecretProblem records a Warning event on m for p, once: with the
// status that first says so (m holds the status from before that write).
func (r *Reconciler) reportSecretProblem(m *cachev1alpha1.Memcached, p *status.SecretProblem) {
	if c := meta.FindStatusCondition(m.Status.Conditions, cachev1alpha1.ConditionStalled); c != nil && c.Reason == p.Reason && c.Message == p.Message {
		return
	}
	r.Recorder.Eventf(m, nil, corev1.EventTypeWarning, p.Reason, "Hold", "%s", p.Message)
}
