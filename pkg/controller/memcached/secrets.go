package memcached

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/example/memcached-operator/pkg/material"
	"github.com/example/memcached-operator/pkg/owned"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

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
	// certificate is memcached's certificate, valid now for the Service's
	// name; nil without TLS or with a problem.
	certificate *material.Certificate
	// recheck is when what the certificate's time says changes next (it
	// becomes valid, expires soon, or expires); zero if never.
	recheck time.Time
}

// secretNames are the Secrets m names, in spec.tls and spec.auth.
func secretNames(m *cachev1alpha1.Memcached) []string {
	var names []string
	if m.Spec.TLS != nil {
		names = append(names, m.Spec.TLS.SecretName)
	}
	if m.Spec.Auth != nil && !slices.Contains(names, m.Spec.Auth.SecretName) {
		names = append(names, m.Spec.Auth.SecretName)
	}
	return names
}

// mountedSecrets tells what m's pods would mount from the Secrets it
// names, as the watcher last saw them; errSecretsPending when one has not
// been listed yet.
func (s *scope) mountedSecrets() (mountedSecrets, error) {
	m := s.m
	var out mountedSecrets
	var err error
	if tls := m.Spec.TLS; tls != nil {
		uses := []secrets.Use{secrets.UseServing}
		if slices.Contains(desired.TLSKeys(m), material.CAKey) {
			uses = append(uses, secrets.UseClientCA)
			if desired.RunsExporter(m) {
				uses = append(uses, secrets.UseClient)
			}
		}
		out.digests.TLS, out.problem, err = s.secretDigest(tls.SecretName, desired.TLSKeys(m), uses)
		if err != nil || out.problem != nil {
			return out, err
		}
		if out.problem = s.checkCertificate(&out, tls.SecretName); out.problem != nil {
			return out, nil
		}
	}
	if auth := m.Spec.Auth; auth != nil {
		key := desired.AuthKey(m)
		out.digests.Auth, out.problem, err = s.secretDigest(auth.SecretName, []string{key}, []secrets.Use{secrets.UseAuthFile(key)})
	}
	return out, err
}

// secretDigest is the digest of the keys of m's Secret name, when it
// holds them and they are fit for uses; otherwise the problem.
func (s *scope) secretDigest(name string, keys []string, uses []secrets.Use) (string, *status.SecretProblem, error) {
	st := s.Secrets.Get(types.NamespacedName{Namespace: s.m.Namespace, Name: name})
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
			Message: fmt.Sprintf("Secret %s does not exist; the StatefulSet is held as it is until it does", name),
		}, nil
	}
	if missing := st.Summary.Missing(keys...); len(missing) > 0 {
		return "", &status.SecretProblem{
			Reason:  cachev1alpha1.ReasonSecretMissing,
			Message: fmt.Sprintf("Secret %s has no key %s; the StatefulSet is held as it is until it does", name, strings.Join(missing, ", ")),
		}, nil
	}
	for _, u := range uses {
		if p, ok := st.Summary.Problems[u]; ok {
			return "", &status.SecretProblem{
				Reason:  cachev1alpha1.ReasonSecretInvalid,
				Message: fmt.Sprintf("Secret %s cannot serve as %s: %s; the StatefulSet is held as it is until it can", name, u, p),
			}, nil
		}
	}
	return st.Summary.Digest(keys...), nil, nil
}

// checkCertificate checks the certificate of the Secret name, which holds
// a usable pair, against the time and the name clients verify; it records
// the certificate and when to look again in out, or returns why memcached
// must not serve it.
func (s *scope) checkCertificate(out *mountedSecrets, name string) *status.SecretProblem {
	st := s.Secrets.Get(types.NamespacedName{Namespace: s.m.Namespace, Name: name})
	cert := st.Summary.Serving
	now := s.now()
	if now.Before(cert.NotBefore) {
		out.recheck = cert.NotBefore
	}
	if err := cert.Check(now, desired.ServiceHost(s.m.Name, s.m.Namespace)); err != nil {
		return &status.SecretProblem{
			Reason:  cachev1alpha1.ReasonSecretInvalid,
			Message: fmt.Sprintf("Secret %s cannot serve as %s: %v; the StatefulSet is held as it is until it can", name, secrets.UseServing, err),
		}
	}
	out.certificate = cert
	if warn := cert.NotAfter.Add(-cert.ExpiringWindow()); now.Before(warn) {
		out.recheck = warn
	} else {
		out.recheck = cert.NotAfter
	}
	return nil
}

// eventReloadFailed is the event reason when a pod could not load new
// Secret content in place and the operator restarts the pods instead.
const eventReloadFailed = cachev1alpha1.ReasonReloadFailed

// restartPodsOnFailedReload completes digests with the Secret content the pods are to be
// restarted for. The pods load new content in place (the reloader); when
// one says it could not, the pods are restarted, one at a time as every
// rollout, to mount what the Secrets hold now: once per content, which
// the StatefulSet's template then records.
func (s *scope) restartPodsOnFailedReload(current *owned.Summary, digests desired.SecretDigests) desired.SecretDigests {
	if !desired.RunsReloader(s.m, s.Images) {
		return digests
	}
	if current != nil {
		digests.RestartedFor = current.RestartedFor
	}
	if digests.RestartedFor == digests.Combined() {
		return digests
	}
	for _, p := range s.obs.Pods {
		if p.ReloadFailed == "" {
			continue
		}
		digests.RestartedFor = digests.Combined()
		s.Recorder.Eventf(s.m, nil, corev1.EventTypeWarning, eventReloadFailed, "Restart",
			"Pod %s could not load the new Secret content in place (%s); restarting the pods one at a time to mount it", p.Name, p.ReloadFailed)
		break
	}
	return digests
}
