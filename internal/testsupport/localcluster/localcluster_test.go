//go:build integration

package localcluster

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/internal/testsupport/testenv"
)

// TestClusterRunsDeployments brings a cluster up, rolls out a plain
// Deployment on its fake nodes, deletes it and sees its ReplicaSet and pods
// garbage-collected, then deletes the cluster and finds none of its
// processes left.
func TestClusterRunsDeployments(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()

	c, err := Create(ctx, "lifecycle", Options{})
	g.Expect(err).NotTo(HaveOccurred())
	deleted := false
	t.Cleanup(func() {
		if !deleted {
			_ = c.Delete(context.Background())
		}
	})
	cfg, err := c.Config()
	g.Expect(err).NotTo(HaveOccurred())
	cl, err := client.New(cfg, client.Options{Scheme: testenv.Scheme})
	g.Expect(err).NotTo(HaveOccurred())

	nodes := &corev1.NodeList{}
	g.Expect(cl.List(ctx, nodes)).To(Succeed())
	g.Expect(nodes.Items).To(HaveLen(2), "two fake nodes")

	labels := map[string]string{"app": "plain"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example.com/plain:1"}}},
			},
		},
	}
	g.Expect(cl.Create(ctx, d)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &appsv1.Deployment{}
		g.Expect(cl.Get(ctx, client.ObjectKeyFromObject(d), got)).To(Succeed())
		g.Expect(got.Status.AvailableReplicas).To(Equal(int32(3)))
		g.Expect(got.Status.Conditions).To(ContainElement(And(
			HaveField("Type", appsv1.DeploymentAvailable), HaveField("Status", corev1.ConditionTrue))))
	}).WithTimeout(time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())

	pods := &corev1.PodList{}
	g.Expect(cl.List(ctx, pods, client.InNamespace("default"), client.MatchingLabels(labels))).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(3))
	for _, p := range pods.Items {
		g.Expect(p.Spec.NodeName).NotTo(BeEmpty(), "scheduled")
		g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
	}

	g.Expect(cl.Delete(ctx, d)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := cl.Get(ctx, client.ObjectKeyFromObject(d), &appsv1.Deployment{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		rs := &appsv1.ReplicaSetList{}
		g.Expect(cl.List(ctx, rs, client.InNamespace("default"), client.MatchingLabels(labels))).To(Succeed())
		g.Expect(rs.Items).To(BeEmpty(), "ReplicaSets garbage-collected")
		pods := &corev1.PodList{}
		g.Expect(cl.List(ctx, pods, client.InNamespace("default"), client.MatchingLabels(labels))).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty(), "pods garbage-collected")
	}).WithTimeout(time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())

	pids, err := c.PIDs()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pids).To(HaveKey("kube-apiserver"))
	for name, pid := range pids {
		g.Expect(running(pid)).To(BeTrue(), "%s (pid %d) runs before the cluster is deleted", name, pid)
	}
	g.Expect(c.Delete(ctx)).To(Succeed())
	deleted = true
	for name, pid := range pids {
		g.Expect(running(pid)).To(BeFalse(), "%s (pid %d) of the deleted cluster still runs", name, pid)
	}
}

// running tells whether process pid exists and has not exited (a zombie
// has exited).
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

// TestTwoClustersAtOnce shows that two clusters with distinct names run
// side by side with distinct apiservers.
func TestTwoClustersAtOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	a, err := Create(ctx, "first", Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = a.Delete(context.Background()) })
	b, err := Create(ctx, "second", Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = b.Delete(context.Background()) })

	ca, err := a.Config()
	g.Expect(err).NotTo(HaveOccurred())
	cb, err := b.Config()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ca.Host).NotTo(Equal(cb.Host))

	cla, err := client.New(ca, client.Options{Scheme: testenv.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	clb, err := client.New(cb, client.Options{Scheme: testenv.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "only-in-first"}}
	g.Expect(cla.Create(ctx, ns)).To(Succeed())
	err = clb.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the clusters share no state")
}

// TestAComponentWhosePIDWasTakenIsStartedAgain: a component that exited
// while its PID file names a live process that is not it (the kernel gave
// its PID to another, here to the apiserver as after the apiserver's
// restart) is reported stopped, and StartStopped starts it: kwokctl alone
// takes it for running.
func TestAComponentWhosePIDWasTakenIsStartedAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, err := Create(ctx, "pidreuse", Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = c.Delete(context.Background()) })

	pids, err := c.PIDs()
	g.Expect(err).NotTo(HaveOccurred())
	kcm, apiserver := pids["kube-controller-manager"], pids["kube-apiserver"]
	g.Expect(kcm).NotTo(BeZero())
	g.Expect(apiserver).NotTo(BeZero())
	g.Expect(syscall.Kill(kcm, syscall.SIGKILL)).To(Succeed())
	g.Eventually(func() bool { return running(kcm) }).WithTimeout(10 * time.Second).Should(BeFalse())
	g.Expect(os.WriteFile(c.pidFile("kube-controller-manager"), []byte(strconv.Itoa(apiserver)), 0o644)).To(Succeed())

	g.Expect(c.Stopped()).To(Equal([]string{"kube-controller-manager"}))
	g.Expect(c.PIDs()).NotTo(HaveKey("kube-controller-manager"))

	g.Expect(c.StartStopped(ctx)).To(Succeed())
	g.Expect(c.Stopped()).To(BeEmpty(), "every component runs again")
	pids, err = c.PIDs()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pids["kube-controller-manager"]).NotTo(BeElementOf(kcm, apiserver))
	g.Expect(pids["kube-apiserver"]).To(Equal(apiserver), "the apiserver was left running")
}
