package memcached

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/pkg/desired"
	"github.com/example/memcached-operator/pkg/discovery"
	"github.com/example/memcached-operator/pkg/move"
	"github.com/example/memcached-operator/pkg/owned"
)

// reconcileMembership applies the ConfigMap of the membership m's
// discovery endpoint serves, from m's size and the addresses its pods have
// or last had (desired.Membership), while its pods serve the endpoint; and
// deletes it otherwise.
func reconcileMembership(ctx context.Context, s *scope) (ctrl.Result, error) {
	if !desired.RunsDiscovery(s.m, s.Images) {
		return ctrl.Result{}, s.remove(ctx, configMaps)
	}
	current, out, err := s.currentReportingForeign(ctx, configMaps)
	if err != nil || out.notOwned {
		s.observe(owned.KindConfigMap, out)
		return ctrl.Result{}, err
	}
	// A membership that does not parse (edited by hand), or that the
	// operator did not publish, is made anew.
	st := membershipOf(current, s.told())
	// A pod's address is published once it is ready: clients reach a new
	// slot, or a slot's new pod, only once memcached serves there (until
	// then a slot keeps the address published last, if any); and, for a
	// pod whose memcached restarts in place, once the restart is confirmed
	// (a slot that handed its keys off takes them back only from the
	// memcached that restarted empty).
	addrs := map[string]desired.PodAddress{}
	for _, p := range s.obs.Pods {
		if p.IP != "" && p.Ready && p.RestartingFrom == "" {
			addrs[p.Name] = desired.PodAddress{IP: p.IP, Port: p.Port}
		}
	}
	leaving := s.leaving()
	membership := desired.Membership(s.m, addrs, st.published, leaving...)
	var plan string
	var res ctrl.Result
	if s.movesKeys() {
		if membership, plan, res, err = s.moveStep(ctx, st, membership, addrs); err != nil {
			return ctrl.Result{}, err
		}
		s.tellKeysLost(st.published, membership)
	}
	out, err = s.apply(ctx, configMaps, current, desired.MembershipConfigMap(s.m, membership, plan))
	s.observe(owned.KindConfigMap, out)
	s.obs.Discovery = out.obj != nil
	s.keysMoving = s.movesKeys() && (plan != "" || len(leaving) > 0 || len(membership.Nodes) < int(desired.Replicas(s.m)))
	if err == nil && out.obj != nil {
		s.published(membership, plan)
		if t := out.obj.LastApplied(); t != nil {
			s.tell.membershipAt = t.Time
		}
		if out.changed {
			s.tell.membershipAt = s.now()
		}
	}
	return res, err
}

// published records membership and plan as what the ConfigMap holds: the
// operator's word on it (publishedSeals), what the pods are to be told,
// and the move under way for the status.
func (s *scope) published(membership discovery.Cluster, plan string) {
	seal := discovery.SealOf(membership.Body(), []byte(plan))
	s.publishedSeals.Store(client.ObjectKeyFromObject(s.m), publishedSeal{uid: s.m.UID, seal: seal, version: membership.Version})
	s.tell.seal = seal.String()
	s.tell.membership = strconv.FormatInt(membership.Version, 10)
	if plan != "" {
		// The pods follow the plan's steps as they follow the
		// membership: told of each.
		p, from, to, _ := move.ParsePlan([]byte(plan))
		s.tell.membership += fmt.Sprintf(" (move %d: %s)", p.ID, p.Step)
		s.obs.Moving = movingMessage(p, from, to)
	}
}

// podNews is what the pods mount from ConfigMaps and Secrets, as the
// operator tells them of it: the membership's version and seal, the
// Secret content's digest; and when the membership's ConfigMap last
// changed.
type podNews struct {
	membership, seal, secrets string
	membershipAt              time.Time
}

// kubeletCatchUp is how long after the membership's ConfigMap changed its
// pods are told of it. The kubelet writes a pod's volumes, when the pod
// changes, from its own watch of the ConfigMap, which may not have the
// change yet when the pod's comes at once: the pod would then hold the new
// seal beside the old membership, and serve the old one until the
// kubelet's periodic sync, a minute or more later. (Seen on the real node,
// once each pod was told only once.)
const kubeletCatchUp = 2 * time.Second

// tellPods sets, on each pod that says otherwise, the membership's version
// (desired.AnnotationMembershipVersion) and the digest of the Secret
// content its reloader renews in place (desired.AnnotationSecretsDigest).
// The kubelet writes a ConfigMap's or a Secret's new content to a pod at
// its periodic sync of the pod (a minute or more), and at once when the
// pod itself changes: so every pod serves a new membership, and loads new
// certificates and passwords, within moments. One patch per pod per
// change; none when nothing changed.
func tellPods(ctx context.Context, s *scope) (ctrl.Result, error) {
	var errs []error
	var result ctrl.Result
	catchUp := kubeletCatchUp - s.now().Sub(s.tell.membershipAt)
	for _, p := range s.obs.Pods {
		if p.Deleting || p.IP == "" {
			// A pod not running yet mounts the content there is when it
			// starts; it is told once it runs, if that changed.
			continue
		}
		news := map[string]string{}
		switch {
		case p.MembershipVersion == s.tell.membership && p.MembershipSeal == s.tell.seal:
			maps.Copy(news, s.retell(p))
		case catchUp > 0 && s.tell.membership != "":
			result = ctrl.Result{RequeueAfter: catchUp}
		default:
			maps.Copy(news, membershipNews(p, s.tell))
		}
		if d := s.tell.secrets; d != "" && p.SecretsDigest != d {
			news[desired.AnnotationSecretsDigest] = d
		}
		if len(news) == 0 {
			continue
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			// Of this pod, not a successor of its name: the apiserver
			// refuses a patch that changes the UID.
			"uid":         p.UID,
			"annotations": news,
		}})
		if err != nil {
			return ctrl.Result{}, err
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
		err = s.Client.Patch(ctx, pod, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(owned.FieldManager))
		switch {
		case err == nil:
			s.Owned.RememberPatched(pod)
		case apierrors.IsNotFound(err), apierrors.IsConflict(err), apierrors.IsInvalid(err):
			// Gone or replaced: its successor mounts the new content.
		case err != nil:
			errs = append(errs, fmt.Errorf("telling pod %s of what it mounts: %w", p.Name, err))
		}
	}
	return result, errors.Join(errs...)
}

// membershipNews are the membership's version and seal that p was not
// told of yet.
func membershipNews(p *owned.Pod, tell podNews) map[string]string {
	news := map[string]string{}
	if v := tell.membership; v != "" && p.MembershipVersion != v {
		news[desired.AnnotationMembershipVersion] = v
	}
	if v := tell.seal; v != "" && p.MembershipSeal != v {
		news[desired.AnnotationMembershipSeal] = v
	}
	return news
}
