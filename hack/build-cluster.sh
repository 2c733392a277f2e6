#!/usr/bin/env bash
# Builds the local cluster's programs from the Go modules pinned in hack/tools/
# into bin/k8s. A binary is rebuilt only when its tools module (go.mod/go.sum)
# or its build flags changed since it was built. Every program of the
# default version is of one module, hack/tools/kubernetes: the packages they
# share compile once, and each go command below builds what is stale of a
# group together (while one program links, the other core compiles).
#
#   hack/build-cluster.sh [control-plane]   etcd, kube-apiserver, kube-controller-manager,
#                                           kube-scheduler, kubectl, kwok, kwokctl
#   hack/build-cluster.sh node              the real node's kubelet and kube-proxy
#                                           (of the control plane's version and
#                                           module), CoreDNS and kube-router
#
# KUBE_VERSION=v1.30.14 (one of versions.env's KUBE_COMPAT_VERSIONS) builds
# that version's control plane, kubelet and kube-proxy into bin/k8s/v1.30.14
# instead, beside links to the programs all versions share (hack/kube-version.sh).
# A version's kubelet and kube-proxy build from its control plane's module
# with the same flags: after the control plane, they compile only the
# packages of their own (about a minute, against twelve for a kubelet of
# another release). The programs every version shares (etcd, kwok, kwokctl,
# kubectl, CoreDNS, kube-router) are the default version's.
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
# The shared programs' flags: kubectl's version, and kwok's own (-X of a
# package a program does not link does nothing).
shared_ldflags="${kubectl_ldflags} -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v} -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=${DEFAULT_KUBE_VERSION#v}"

# build BIN_DIR MODULE_DIR LDFLAGS NAME=PACKAGE...: builds, from the tools
# module MODULE_DIR, each program NAME whose stamp says it is stale. The
# stale ones are built by one go command: the packages they share are
# compiled once, and while one program links the other core compiles.
build() {
  local bin_dir="$1" dir="${ROOT}/hack/tools/$2" ldflags="$3"
  shift 3
  local names=() pkgs=() wants=() spec name pkg want
  for spec in "$@"; do
    name="${spec%%=*}" pkg="${spec#*=}"
    want="$(cat "${dir}/go.mod" "${dir}/go.sum" <(echo "${pkg} ${ldflags}") | sha256sum | cut -d' ' -f1)"
    if [[ -x "${bin_dir}/${name}" && -f "${bin_dir}/.${name}.stamp" && "$(cat "${bin_dir}/.${name}.stamp")" == "${want}" ]]; then
      echo "up to date: ${bin_dir#"${ROOT}/"}/${name}"
      continue
    fi
    names+=("${name}") pkgs+=("${pkg}") wants+=("${want}")
  done
  ((${#names[@]})) || return 0
  echo "building ${names[*]} into ${bin_dir#"${ROOT}/"}"
  local start=${SECONDS} out i
  out="$(mktemp -d)"
  (cd "${dir}" && CGO_ENABLED=0 go build -ldflags "${ldflags}" -o "${out}/" "${pkgs[@]}")
  for i in "${!names[@]}"; do
    mv "${out}/$(program_of "${pkgs[i]}")" "${bin_dir}/${names[i]}"
    echo "${wants[i]}" > "${bin_dir}/.${names[i]}.stamp"
  done
  rm -rf "${out}"
  echo "built ${names[*]} in $((SECONDS - start))s"
}

# program_of PACKAGE: the name go build gives PACKAGE's program: its last
# path element, or the one before a major version suffix (/v3).
program_of() {
  local base="${1##*/}"
  if [[ "${base}" =~ ^v[0-9]+$ ]]; then
    base="${1%/*}"
    base="${base##*/}"
  fi
  echo "${base}"
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
  # kubectl is the newest: it is the one people use, whatever the cluster.
  local shared_programs=(etcd=go.etcd.io/etcd/server/v3 kwokctl=sigs.k8s.io/kwok/cmd/kwokctl
    kwok=sigs.k8s.io/kwok/cmd/kwok kubectl=k8s.io/kubernetes/cmd/kubectl)
  local control=(kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler
    kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager
    kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver)
  if [[ "${KUBE_BIN_DIR}" == "${SHARED_BIN_DIR}" ]]; then
    build "${SHARED_BIN_DIR}" kubernetes "${shared_ldflags}" "${shared_programs[@]}" "${control[@]}"
    return
  fi
  build "${SHARED_BIN_DIR}" kubernetes "${shared_ldflags}" "${shared_programs[@]}"
  shared etcd kwokctl kwok kubectl
  build "${KUBE_BIN_DIR}" "${KUBE_TOOLS_DIR}" "${kube_ldflags}" "${control[@]}"
}

node() {
  local node=(kubelet=k8s.io/kubernetes/cmd/kubelet kube-proxy=k8s.io/kubernetes/cmd/kube-proxy)
  local dns_and_policies=(coredns=github.com/example/memcached-operator/hack/tools/kubernetes/coredns
    kube-router=github.com/cloudnativelabs/kube-router/v2/cmd/kube-router)
  if [[ "${KUBE_BIN_DIR}" == "${SHARED_BIN_DIR}" ]]; then
    build "${SHARED_BIN_DIR}" kubernetes "${shared_ldflags}" "${node[@]}" "${dns_and_policies[@]}"
    return
  fi
  build "${SHARED_BIN_DIR}" kubernetes "${shared_ldflags}" "${dns_and_policies[@]}"
  shared coredns kube-router
  build "${KUBE_BIN_DIR}" "${KUBE_TOOLS_DIR}" "${kube_ldflags}" "${node[@]}"
}

case "${1:-control-plane}" in
  control-plane) control_plane ;;
  node) node ;;
  *) sed -n '2,/^set -euo/{/^set -euo/!p}' "$0" >&2; exit 2 ;;
esac
