#!/usr/bin/env bash
# Manages the local cluster: a real control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler) with kwok as a fake kubelet, run as
# host processes by kwokctl's binary runtime from the binaries in bin/k8s.
#
#   hack/cluster.sh up              create the cluster (idempotent), write its kubeconfig
#   hack/cluster.sh down            delete the cluster and stop every process it started
#   hack/cluster.sh kubeconfig      print the path of the admin kubeconfig
#   hack/cluster.sh sa-kubeconfig NAMESPACE SERVICEACCOUNT
#                                   print a kubeconfig that authenticates as that ServiceAccount
#
# Environment:
#   CLUSTER_NAME   cluster name (default memcached-operator); distinct names give
#                  distinct clusters, ports and state folders, so several can run at once
#   STATE_DIR      where state and kubeconfigs live (default .local)
#   AUDIT_USER     when set at creation, the apiserver writes an audit log of that
#                  user's requests to "$(hack/cluster.sh audit-log)"
#   NODES          number of fake nodes (default 2, or 0 with REAL_NODE=1)
#   REAL_NODE      1: add a real node (hack/node.sh: kubelet, containerd, kube-proxy,
#                  CoreDNS) whose pods run real containers; needs root, and
#                  'make node-binaries images' first. One per machine.
#   REAL_NODE_TAINTS  taints of the real node (default none)
#   KUBE_VERSION   another Kubernetes version of the control plane (and of the
#                  real node's kubelet), one of versions.env's KUBE_COMPAT_VERSIONS,
#                  built by 'KUBE_VERSION=... make k8s-binaries' (hack/kube-version.sh)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=kube-version.sh
source "${ROOT}/hack/kube-version.sh"
BIN_DIR="${BIN_DIR:-${KUBE_BIN_DIR}}"
STATE_DIR="${STATE_DIR:-${ROOT}/.local}"
CLUSTER_NAME="${CLUSTER_NAME:-memcached-operator}"
REAL_NODE="${REAL_NODE:-0}"
if [[ "${REAL_NODE}" == 1 ]]; then NODES="${NODES:-0}"; else NODES="${NODES:-2}"; fi
# The in-cluster address of the apiserver: the first of this range, which its
# serving certificate names so that pods using the kubernetes Service trust it.
SERVICE_CIDR=10.96.0.0/16
KUBERNETES_SERVICE_IP=10.96.0.1
KUBECONFIG_PATH="${STATE_DIR}/${CLUSTER_NAME}.kubeconfig"

export KWOK_WORKDIR="${STATE_DIR}/kwok"
export KWOK_RUNTIME=binary
export KWOK_KUBE_VERSION="${KUBE_VERSION}"
export KWOK_KUBECTL_BINARY="${BIN_DIR}/kubectl"
# kwokctl runs the first kubectl on PATH when there is one: make it ours.
export PATH="${BIN_DIR}:${PATH}"
kwokctl="${BIN_DIR}/kwokctl"

need_binaries() {
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kwok kwokctl kubectl; do
    if [[ ! -x "${BIN_DIR}/${b}" ]]; then
      echo "missing ${BIN_DIR}/${b}: run 'make k8s-binaries' (hack/build-cluster.sh) first" >&2
      exit 1
    fi
  done
}

exists() {
  "${kwokctl}" get clusters 2>/dev/null | grep -qx "${CLUSTER_NAME}"
}

up() {
  need_binaries
  mkdir -p "${STATE_DIR}"
  if exists; then
    local was
    was="$(sed -n 's/^ *kubeVersion: //p' "${KWOK_WORKDIR}/clusters/${CLUSTER_NAME}/kwok.yaml" 2>/dev/null || true)"
    if [[ -n "${was}" && "${was}" != "${KUBE_VERSION}" ]]; then
      echo "cluster ${CLUSTER_NAME} runs Kubernetes ${was}, not ${KUBE_VERSION}: 'hack/cluster.sh down' it first, or pick another CLUSTER_NAME" >&2
      exit 1
    fi
    # A cluster left from an earlier boot has its state but not its processes.
    "${kwokctl}" start cluster --name "${CLUSTER_NAME}" --wait 60s >/dev/null 2>&1 || true
  else
    local args=() pki="${KWOK_WORKDIR}/clusters/${CLUSTER_NAME}/pki"
    local config="${STATE_DIR}/${CLUSTER_NAME}-kwokctl.yaml"
    # Settings for a real node (hack/node.sh), harmless without one. In the
    # configuration file: kwokctl v0.8.0's --extra-args mixes up components
    # when given several flags of one component and then another.
    cat > "${config}" <<CONFIG
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  kubeApiserverCertSANs: ["${KUBERNETES_SERVICE_IP}"]
componentsPatches:
- name: kube-apiserver
  extraArgs:
  - {key: service-cluster-ip-range, value: "${SERVICE_CIDR}"}
  # logs and exec reach a real node's kubelet at its address, as the admin.
  - {key: kubelet-preferred-address-types, value: "InternalIP,Hostname"}
  - {key: kubelet-client-certificate, value: "${pki}/admin.crt"}
  - {key: kubelet-client-key, value: "${pki}/admin.key"}
  # A namespace's annotations may place its pods on a node and let them
  # tolerate its taint: the scorecard's pods have no selector or toleration
  # of their own (hack/scorecard.sh).
  - {key: enable-admission-plugins, value: "PodNodeSelector,PodTolerationRestriction"}
# kwok fakes only its own nodes, never a real one.
- name: kwok-controller
  extraArgs:
  - {key: manage-all-nodes, value: "false"}
  - {key: manage-nodes-with-annotation-selector, value: "kwok.x-k8s.io/node=fake"}
CONFIG
    args+=(--config "${config}")
    if [[ -n "${AUDIT_USER:-}" ]]; then
      local policy="${STATE_DIR}/${CLUSTER_NAME}-audit-policy.yaml"
      cat > "${policy}" <<POLICY
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  users: ["${AUDIT_USER}"]
- level: None
POLICY
      args+=(--kube-audit-policy "${policy}")
    fi
    # kwokctl picks its ports by counting down from the same number in every
    # process, so two clusters created at once (test packages run in
    # parallel) get the same ports. One creation at a time: once a cluster
    # is up its ports are taken, and the next creation skips them.
    exec 9>"${TMPDIR:-/tmp}/memcached-operator-kwokctl-create.lock"
    flock 9
    "${kwokctl}" create cluster --name "${CLUSTER_NAME}" --runtime binary \
      --etcd-binary "${BIN_DIR}/etcd" \
      --kube-apiserver-binary "${BIN_DIR}/kube-apiserver" \
      --kube-controller-manager-binary "${BIN_DIR}/kube-controller-manager" \
      --kube-scheduler-binary "${BIN_DIR}/kube-scheduler" \
      --kwok-controller-binary "${BIN_DIR}/kwok" \
      --kube-authorization \
      --disable-qps-limits \
      --wait 120s "${args[@]}"
    if ((NODES > 0)); then
      # Room for thousands of pods: the default fake node allows 110.
      "${kwokctl}" scale node --replicas "${NODES}" --name "${CLUSTER_NAME}" \
        --param ".allocatable.pods=5000" --param ".allocatable.cpu=1000" --param ".allocatable.memory=\"4Ti\""
    fi
    flock -u 9
  fi
  "${kwokctl}" get kubeconfig --name "${CLUSTER_NAME}" > "${KUBECONFIG_PATH}"
  if [[ "${REAL_NODE}" == 1 ]]; then
    KUBECONFIG="${KUBECONFIG_PATH}" NODE_DIR="${STATE_DIR}/${CLUSTER_NAME}-real-node" \
      NODE_TAINTS="${REAL_NODE_TAINTS:-}" "${ROOT}/hack/node.sh" up
  fi
  echo "cluster ${CLUSTER_NAME} is up; kubeconfig: ${KUBECONFIG_PATH}"
}

# wait_gone SECONDS PID...: true once none of the processes runs (a zombie
# has exited), false when some still runs after SECONDS.
wait_gone() {
  local deadline=$((SECONDS + $1)) pid state
  shift
  while ((SECONDS < deadline)); do
    local alive=0
    for pid in "$@"; do
      state=$(awk '{sub(/.*\) /, ""); print $1}' "/proc/${pid}/stat" 2>/dev/null || true)
      [[ -n "${state}" && "${state}" != Z ]] && alive=1
    done
    ((alive)) || return 0
    sleep 0.2
  done
  return 1
}

down() {
  local node_failed=""
  if [[ -d "${STATE_DIR}/${CLUSTER_NAME}-real-node" ]]; then
    # The control plane goes whatever happens to the node: stopping it is
    # the one chance, as its state folder may be removed next.
    KUBECONFIG="${KUBECONFIG_PATH}" NODE_DIR="${STATE_DIR}/${CLUSTER_NAME}-real-node" "${ROOT}/hack/node.sh" down || node_failed=1
  fi
  if [[ -x "${kwokctl}" ]] && exists; then
    # kwokctl signals the components and returns without waiting for them:
    # an apiserver may still be shutting down when it is done. Down means
    # gone, so wait for each (and kill what outlives 30 seconds).
    local pids=() f
    for f in "${KWOK_WORKDIR}/clusters/${CLUSTER_NAME}/pids/"*.pid; do
      [[ -f "${f}" ]] && pids+=("$(<"${f}")")
    done
    "${kwokctl}" delete cluster --name "${CLUSTER_NAME}"
    wait_gone 30 "${pids[@]}" || { kill -KILL "${pids[@]}" 2>/dev/null || true; wait_gone 10 "${pids[@]}"; }
  fi
  rm -f "${KUBECONFIG_PATH}" "${STATE_DIR}/${CLUSTER_NAME}-audit-policy.yaml" "${STATE_DIR}/${CLUSTER_NAME}-kwokctl.yaml"
  if [[ -n "${node_failed}" ]]; then
    echo "cluster ${CLUSTER_NAME} is down, but stopping its real node failed (see above)" >&2
    return 1
  fi
  echo "cluster ${CLUSTER_NAME} is down"
}

sa_kubeconfig() {
  local ns="$1" sa="$2" kubectl=("${BIN_DIR}/kubectl" --kubeconfig "${KUBECONFIG_PATH}")
  local server ca token
  server="$("${kubectl[@]}" config view --raw --minify -o jsonpath='{.clusters[0].cluster.server}')"
  ca="$("${kubectl[@]}" config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')"
  token="$("${kubectl[@]}" create token "${sa}" -n "${ns}" --duration 24h)"
  cat <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: ${CLUSTER_NAME}
  cluster:
    server: ${server}
    certificate-authority-data: ${ca}
users:
- name: ${ns}-${sa}
  user:
    token: ${token}
contexts:
- name: ${ns}-${sa}
  context:
    cluster: ${CLUSTER_NAME}
    user: ${ns}-${sa}
    namespace: ${ns}
current-context: ${ns}-${sa}
KUBECONFIG
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  kubeconfig) echo "${KUBECONFIG_PATH}" ;;
  audit-log) echo "${KWOK_WORKDIR}/clusters/${CLUSTER_NAME}/logs/audit.log" ;;
  sa-kubeconfig) sa_kubeconfig "${2:?namespace}" "${3:?serviceaccount}" ;;
  *) sed -n '2,24p' "$0" >&2; exit 2 ;;
esac
