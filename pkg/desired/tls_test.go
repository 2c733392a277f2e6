package desired

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/api/v1alpha1"
)

func TestCommandServesTLSAndAuthenticates(t *testing.T) {
	tests := []struct {
		name string
		spec cachev1alpha1.MemcachedSpec
		want []string
	}{
		{"TLS", cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "tls"}},
			[]string{"memcached", "--port=11211", "--enable-ssl", "--extended=ssl_chain_cert=/etc/memcached/tls/tls.crt,ssl_key=/etc/memcached/tls/tls.key"}},
		{"TLS, no client certificates", cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "tls", ClientCertificates: cachev1alpha1.ClientCertificatesNone}},
			[]string{"memcached", "--port=11211", "--enable-ssl", "--extended=ssl_chain_cert=/etc/memcached/tls/tls.crt,ssl_key=/etc/memcached/tls/tls.key"}},
		{"TLS, client certificates requested", cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "tls", ClientCertificates: cachev1alpha1.ClientCertificatesRequest}},
			[]string{"memcached", "--port=11211", "--enable-ssl", "--extended=ssl_chain_cert=/etc/memcached/tls/tls.crt,ssl_key=/etc/memcached/tls/tls.key,ssl_ca_cert=/etc/memcached/tls/ca.crt,ssl_verify_mode=1"}},
		{"TLS, client certificates required", cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "tls", ClientCertificates: cachev1alpha1.ClientCertificatesRequire}},
			[]string{"memcached", "--port=11211", "--enable-ssl", "--extended=ssl_chain_cert=/etc/memcached/tls/tls.crt,ssl_key=/etc/memcached/tls/tls.key,ssl_ca_cert=/etc/memcached/tls/ca.crt,ssl_verify_mode=2"}},
		{"auth, whatever the key", cachev1alpha1.MemcachedSpec{Auth: &cachev1alpha1.AuthSpec{SecretName: "users", Key: "memcached.users"}},
			[]string{"memcached", "--port=11211", "--auth-file=/etc/memcached/auth/authfile"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(Command(memcached("cache", tt.spec))).To(Equal(tt.want))
		})
	}
}

// The pods mount only the keys they use, read-only, readable through the
// pod's group only; a new digest is a new template.
func TestPodsMountTheSecretsTheyUse(t *testing.T) {
	g := NewWithT(t)
	m := memcached("cache", cachev1alpha1.MemcachedSpec{
		TLS:  &cachev1alpha1.TLSSpec{SecretName: "cache-tls", ClientCertificates: cachev1alpha1.ClientCertificatesRequire},
		Auth: &cachev1alpha1.AuthSpec{SecretName: "cache-users", Key: "users"},
	})
	tmpl := StatefulSet(m, testImages, SecretDigests{TLS: "t1", Auth: "a1"}).Spec.Template
	g.Expect(tmpl.Annotations).To(Equal(map[string]string{AnnotationTLSDigest: "t1", AnnotationAuthDigest: "a1"}))
	pod := tmpl.Spec
	g.Expect(*pod.SecurityContext.FSGroup).To(Equal(int64(memcachedUser)))
	g.Expect(pod.Volumes).To(HaveLen(2))
	tls, auth := pod.Volumes[0], pod.Volumes[1]
	g.Expect(*tls.Name).To(Equal(tlsVolume))
	g.Expect(*tls.Secret.SecretName).To(Equal("cache-tls"))
	g.Expect(*tls.Secret.DefaultMode).To(Equal(int32(0o440)))
	var keys []string
	for _, i := range tls.Secret.Items {
		g.Expect(*i.Path).To(Equal(*i.Key))
		keys = append(keys, *i.Key)
	}
	g.Expect(keys).To(Equal([]string{"tls.crt", "tls.key", "ca.crt"}))
	g.Expect(*auth.Secret.SecretName).To(Equal("cache-users"))
	g.Expect(auth.Secret.Items).To(HaveLen(1))
	g.Expect(*auth.Secret.Items[0].Key).To(Equal("users"))
	g.Expect(*auth.Secret.Items[0].Path).To(Equal("authfile"))
	mounts := pod.Containers[0].VolumeMounts
	g.Expect(mounts).To(HaveLen(2))
	for _, mt := range mounts {
		g.Expect(*mt.ReadOnly).To(BeTrue())
	}
	g.Expect(*mounts[0].MountPath).To(Equal(tlsDir))
	g.Expect(*mounts[1].MountPath).To(Equal(authDir))

	rotated := StatefulSet(m, testImages, SecretDigests{TLS: "t2", Auth: "a1"}).Spec.Template
	g.Expect(rotated.Annotations[AnnotationTLSDigest]).To(Equal("t2"))

	// Without client certificates, ca.crt is neither mounted nor digested.
	m.Spec.TLS.ClientCertificates = cachev1alpha1.ClientCertificatesNone
	g.Expect(TLSKeys(m)).To(Equal([]string{"tls.crt", "tls.key"}))
	// Without Secrets, the pods stay as they were: no volume, no group,
	// no annotation (an operator upgrade rolls nothing for them).
	plain := StatefulSet(memcached("cache", cachev1alpha1.MemcachedSpec{}), testImages, SecretDigests{TLS: "ignored"}).Spec.Template
	g.Expect(plain.Annotations).To(BeEmpty())
	g.Expect(plain.Spec.Volumes).To(BeEmpty())
	g.Expect(plain.Spec.SecurityContext.FSGroup).To(BeNil())
}

// The exporter scrapes over TLS, and presents memcached's certificate only
// when memcached asks clients for one.
func TestExporterScrapesOverTLS(t *testing.T) {
	g := NewWithT(t)
	m := memcached("cache", cachev1alpha1.MemcachedSpec{
		Monitoring: &cachev1alpha1.MonitoringSpec{Enabled: true},
		TLS:        &cachev1alpha1.TLSSpec{SecretName: "cache-tls"},
		Size:       ptr.To[int32](1),
	})
	exp := StatefulSet(m, testImages, SecretDigests{}).Spec.Template.Spec.Containers[1]
	g.Expect(*exp.Name).To(Equal(ExporterContainerName))
	g.Expect(exp.Args).To(ContainElements("--memcached.tls.enable", "--memcached.tls.insecure-skip-verify"))
	g.Expect(exp.Args).NotTo(ContainElement(HavePrefix("--memcached.tls.cert-file")))
	g.Expect(exp.VolumeMounts).To(BeEmpty(), "no key material it does not need")

	m.Spec.TLS.ClientCertificates = cachev1alpha1.ClientCertificatesRequire
	exp = StatefulSet(m, testImages, SecretDigests{}).Spec.Template.Spec.Containers[1]
	g.Expect(exp.Args).To(ContainElements("--memcached.tls.cert-file=/etc/memcached/tls/tls.crt", "--memcached.tls.key-file=/etc/memcached/tls/tls.key"))
	g.Expect(exp.VolumeMounts).To(HaveLen(1))
	g.Expect(*exp.VolumeMounts[0].MountPath).To(Equal(tlsDir))
}
