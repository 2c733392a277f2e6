#!/usr/bin/env bash
# Builds the local cluster's programs from the Go modules pinned in hack/tools/
# into BIN_DIR (default bin/k8s). A binary is rebuilt only when its tools module
# (go.mod/go.sum) or its build flags changed since it was built.
#
#   hack/build-cluster.sh [control-plane]   etcd, kube-apiserver, kube-controller-manager,
#                                           kube-scheduler, kubectl, kwok, kwokctl
#   hack/build-cluster.sh node              the real node's kubelet and kube-proxy
#                                           (NODE_VERSION) and CoreDNS
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN_DIR="${BIN_DIR:-${ROOT}/bin/k8s}"
# shellcheck source=versions.env
source "${ROOT}/hack/versions.env"
mkdir -p "${BIN_DIR}"

kube_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${KUBE_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${KUBE_MINOR} -X k8s.io/component-base/version.gitTreeState=clean"
kwok_ldflags="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v} -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=${KUBE_VERSION#v}"

# build NAME MODULE_DIR PACKAGE LDFLAGS
build() {
  local name="$1" dir="${ROOT}/hack/tools/$2" pkg="$3" ldflags="$4"
  local stamp want
  stamp="${BIN_DIR}/.${name}.stamp"
  want="$(cat "${dir}/go.mod" "${dir}/go.sum" <(echo "${pkg} ${ldflags}") | sha256sum | cut -d' ' -f1)"
  if [[ -x "${BIN_DIR}/${name}" && -f "${stamp}" && "$(cat "${stamp}")" == "${want}" ]]; then
    echo "up to date: ${name}"
    return
  fi
  echo "building ${name} (${pkg})"
  local start=${SECONDS}
  (cd "${dir}" && CGO_ENABLED=0 go build -ldflags "${ldflags}" -o "${BIN_DIR}/${name}" "${pkg}")
  echo "${want}" > "${stamp}"
  echo "built ${name} in $((SECONDS - start))s"
}

control_plane() {
  build etcd etcd go.etcd.io/etcd/server/v3 "-s -w"
  build kwokctl kwok sigs.k8s.io/kwok/cmd/kwokctl "${kwok_ldflags}"
  build kwok kwok sigs.k8s.io/kwok/cmd/kwok "${kwok_ldflags}"
  build kubectl kubernetes k8s.io/kubernetes/cmd/kubectl "${kube_ldflags}"
  build kube-scheduler kubernetes k8s.io/kubernetes/cmd/kube-scheduler "${kube_ldflags}"
  build kube-controller-manager kubernetes k8s.io/kubernetes/cmd/kube-controller-manager "${kube_ldflags}"
  build kube-apiserver kubernetes k8s.io/kubernetes/cmd/kube-apiserver "${kube_ldflags}"
}

node() {
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${NODE_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${NODE_MINOR} -X k8s.io/component-base/version.gitTreeState=clean"
  build kubelet node k8s.io/kubernetes/cmd/kubelet "${ldflags}"
  build kube-proxy node k8s.io/kubernetes/cmd/kube-proxy "${ldflags}"
  build coredns coredns github.com/coredns/coredns "-s -w"
}

case "${1:-control-plane}" in
  control-plane) control_plane ;;
  node) node ;;
  *) sed -n '2,12p' "$0" >&2; exit 2 ;;
esac
