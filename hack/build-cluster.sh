#!/usr/bin/env bash
# Builds the local cluster's programs from the Go modules pinned in hack/tools/
# into bin/k8s. A binary is rebuilt only when its tools module (go.mod/go.sum)
# or its build flags changed since it was built.
#
#   hack/build-cluster.sh [control-plane]   etcd, kube-apiserver, kube-controller-manager,
#                                           kube-scheduler, kubectl, kwok, kwokctl
#   hack/build-cluster.sh node              the real node's kubelet and kube-proxy
#                                           (NODE_VERSION), CoreDNS and kube-router
#
# KUBE_VERSION=v1.30.14 (one of versions.env's KUBE_COMPAT_VERSIONS) builds
# that version's control plane, kubelet and kube-proxy into bin/k8s/v1.30.14
# instead, beside links to the programs all versions share (hack/kube-version.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=kube-version.sh
source "${ROOT}/hack/kube-version.sh"
mkdir -p "${SHARED_BIN_DIR}" "${KUBE_BIN_DIR}"

# version_ldflags VERSION MINOR: what `kubectl version` and /version report.
version_ldflags() {
  echo "-s -w -X k8s.io/component-base/version.gitVersion=$1 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$2 -X k8s.io/component-base/version.gitTreeState=clean"
}
kube_ldflags="$(version_ldflags "${KUBE_VERSION}" "${KUBE_MINOR}")"
kubectl_ldflags="$(version_ldflags "${DEFAULT_KUBE_VERSION}" "${DEFAULT_KUBE_MINOR}")"
kwok_ldflags="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v} -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=${DEFAULT_KUBE_VERSION#v}"

# build BIN_DIR NAME MODULE_DIR PACKAGE LDFLAGS
build() {
  local bin_dir="$1" name="$2" dir="${ROOT}/hack/tools/$3" pkg="$4" ldflags="$5"
  local stamp want
  stamp="${bin_dir}/.${name}.stamp"
  want="$(cat "${dir}/go.mod" "${dir}/go.sum" <(echo "${pkg} ${ldflags}") | sha256sum | cut -d' ' -f1)"
  if [[ -x "${bin_dir}/${name}" && -f "${stamp}" && "$(cat "${stamp}")" == "${want}" ]]; then
    echo "up to date: ${bin_dir#"${ROOT}/"}/${name}"
    return
  fi
  echo "building ${bin_dir#"${ROOT}/"}/${name} (${pkg})"
  local start=${SECONDS}
  (cd "${dir}" && CGO_ENABLED=0 go build -ldflags "${ldflags}" -o "${bin_dir}/${name}" "${pkg}")
  echo "${want}" > "${stamp}"
  echo "built ${name} in $((SECONDS - start))s"
}

# shared NAME...: links the programs every version shares into a compat
# version's folder.
shared() {
  [[ "${KUBE_BIN_DIR}" == "${SHARED_BIN_DIR}" ]] && return
  local name
  for name in "$@"; do
    ln -sfn "../${name}" "${KUBE_BIN_DIR}/${name}"
  done
}

control_plane() {
  build "${SHARED_BIN_DIR}" etcd etcd go.etcd.io/etcd/server/v3 "-s -w"
  build "${SHARED_BIN_DIR}" kwokctl kwok sigs.k8s.io/kwok/cmd/kwokctl "${kwok_ldflags}"
  build "${SHARED_BIN_DIR}" kwok kwok sigs.k8s.io/kwok/cmd/kwok "${kwok_ldflags}"
  # kubectl is the newest: it is the one people use, whatever the cluster.
  build "${SHARED_BIN_DIR}" kubectl kubernetes k8s.io/kubernetes/cmd/kubectl "${kubectl_ldflags}"
  shared etcd kwokctl kwok kubectl
  build "${KUBE_BIN_DIR}" kube-scheduler "${KUBE_TOOLS_DIR}" k8s.io/kubernetes/cmd/kube-scheduler "${kube_ldflags}"
  build "${KUBE_BIN_DIR}" kube-controller-manager "${KUBE_TOOLS_DIR}" k8s.io/kubernetes/cmd/kube-controller-manager "${kube_ldflags}"
  build "${KUBE_BIN_DIR}" kube-apiserver "${KUBE_TOOLS_DIR}" k8s.io/kubernetes/cmd/kube-apiserver "${kube_ldflags}"
}

node() {
  local ldflags tools=node
  ldflags="$(version_ldflags "${NODE_VERSION}" "${NODE_MINOR}")"
  [[ "${KUBE_BIN_DIR}" == "${SHARED_BIN_DIR}" ]] || tools="${KUBE_TOOLS_DIR}"
  build "${KUBE_BIN_DIR}" kubelet "${tools}" k8s.io/kubernetes/cmd/kubelet "${ldflags}"
  build "${KUBE_BIN_DIR}" kube-proxy "${tools}" k8s.io/kubernetes/cmd/kube-proxy "${ldflags}"
  build "${SHARED_BIN_DIR}" coredns coredns github.com/coredns/coredns "-s -w"
  build "${SHARED_BIN_DIR}" kube-router kube-router github.com/cloudnativelabs/kube-router/v2/cmd/kube-router "-s -w"
  shared coredns kube-router
}

case "${1:-control-plane}" in
  control-plane) control_plane ;;
  node) node ;;
  *) sed -n '2,12p' "$0" >&2; exit 2 ;;
esac
