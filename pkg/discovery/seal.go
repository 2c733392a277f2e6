package discovery

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Seal vouches for what a Memcached's membership ConfigMap holds: the
// digest of the membership (its Body) and of the move of keys published
// beside it ("" for none). The ConfigMap is a channel anyone with
// ConfigMap rights in the namespace can write to; a Memcached's pods are
// not. So the operator sets the seal of what it published on each pod
// (an annotation the pod mounts beside the ConfigMap, in one projected
// volume), and a pod serves a membership, and follows a plan, only where
// the seal it was given vouches for it. The operator, too, trusts what
// the ConfigMap holds only where the seal it last published, or one its
// pods carry, vouches for it.
type Seal struct {
	// Cluster and Plan are the hex SHA-256 of the membership's Body and
	// of the plan.
	Cluster, Plan string
}

// SealFile is the name of the seal's file beside the membership and the
// plan in a pod.
const SealFile = "seal"

// SealOf is the seal of membership, the Body of a cluster, and plan.
func SealOf(membership, plan []byte) Seal {
	return Seal{Cluster: digest(membership), Plan: digest(plan)}
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// String is the seal as the pod's annotation holds it.
func (s Seal) String() string {
	return "cluster=" + s.Cluster + " plan=" + s.Plan
}

// ParseSeal reads a seal from its String.
func ParseSeal(v string) (Seal, error) {
	var s Seal
	cluster, plan, ok := strings.Cut(strings.TrimSpace(v), " ")
	if s.Cluster, ok = strings.CutPrefix(cluster, "cluster="); !ok || !isDigest(s.Cluster) {
		return Seal{}, fmt.Errorf("the seal %q names no membership digest", v)
	}
	if s.Plan, ok = strings.CutPrefix(plan, "plan="); !ok || !isDigest(s.Plan) {
		return Seal{}, fmt.Errorf("the seal %q names no plan digest", v)
	}
	return s, nil
}

func isDigest(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// VouchesCluster tells whether s vouches for the membership body.
func (s Seal) VouchesCluster(body []byte) bool { return s.Cluster == digest(body) }

// VouchesPlan tells whether s vouches for the plan.
func (s Seal) VouchesPlan(plan []byte) bool { return s.Plan == digest(plan) }

// ErrNoSeal: the pod was not given a seal yet (a pod the operator has not
// told of the membership since it started).
var ErrNoSeal = errors.New("no seal is given to the pod yet")

// ReadSeal reads the seal a pod was given, from file.
func ReadSeal(file string) (Seal, error) {
	b, err := os.ReadFile(file)
	switch {
	case errors.Is(err, os.ErrNotExist) || (err == nil && len(strings.TrimSpace(string(b))) == 0):
		return Seal{}, ErrNoSeal
	case err != nil:
		return Seal{}, err
	}
	return ParseSeal(string(b))
}
