#!/usr/bin/env bash
# Runs a real node in a local cluster: containerd with its CRI plugin, runc and
# the CNI bridge plugin from Debian's packages, a kubelet and kube-proxy
# (iptables mode) of the control plane's version, CoreDNS, and kube-router's firewall (which enforces
# NetworkPolicies with iptables and ipset) built by `hack/build-cluster.sh
# node`, all as host processes. Its pods run real containers from the images of
# hack/images.sh (no registry: images are imported, never pulled).
#
#   hack/node.sh up      join the node to the cluster of $KUBECONFIG, wait until Ready
#   hack/node.sh import TAR...
#                        import images (tars of hack/images.sh) into the running
#                        node's containerd, as `up` imports every one there is
#   hack/node.sh down    delete its pods, stop every process, remove its containers,
#                        mounts, bridge, iptables chains, ipsets and state
#
# Environment:
#   KUBECONFIG     admin kubeconfig of the cluster (required)
#   NODE_DIR       state folder (default .local/real-node)
#   NODE_NAME      the Node's name (default real-node)
#   NODE_TAINTS    taints it registers with, comma-separated key=value:Effect
#
# containerd's socket is /run/memcached-operator-real-node/containerd.sock
# (ctr --address ... --namespace k8s.io reaches the pods' containers).
#
# One real node per machine: its bridge, ports, DNS address and iptables chains
# are the machine's. Needs root.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=kube-version.sh
source "${ROOT}/hack/kube-version.sh"
BIN_DIR="${BIN_DIR:-${KUBE_BIN_DIR}}"
IMAGE_DIR="${IMAGE_DIR:-${ROOT}/bin/images}"
NODE_DIR="$(realpath -m "${NODE_DIR:-${ROOT}/.local/real-node}")"
NODE_NAME="${NODE_NAME:-real-node}"
NODE_TAINTS="${NODE_TAINTS:-}"
CNI_BIN_DIR=/usr/lib/cni
BRIDGE=mcop0
POD_SUBNET=10.244.0.0/24
CLUSTER_DOMAIN=cluster.local
KUBELET_PORT=10250
KUBELET_HEALTHZ_PORT=10248
KUBE_ROUTER_HEALTH_PORT=20244
# The machine's one real node: its owner file (see one_per_machine), and what
# holds unix sockets (containerd's socket and state, the kubelet's root), at
# paths short enough for a socket whatever NODE_DIR is.
RUN_DIR=/run/memcached-operator-real-node
LOCK="${RUN_DIR}/owner"
kubectl=("${BIN_DIR}/kubectl")
sock="${RUN_DIR}/containerd.sock"
ctr=(ctr --address "${sock}" --namespace k8s.io)

log() { echo "real node: $*"; }
die() { echo "real node: $*" >&2; exit 1; }

# fail COMPONENT MESSAGE: die, showing the end of the component's log (the
# state folder may be removed by whoever cleans up after the failure).
fail() {
  echo "real node: $2; the end of ${NODE_DIR}/logs/$1.log:" >&2
  tail -n 30 "${NODE_DIR}/logs/$1.log" >&2 2>/dev/null || true
  exit 1
}

node_ip() {
  # The address of the default route's interface: pods reach the host, its
  # DNS and the apiserver there (loopback is not reachable from a pod).
  ip -4 route get 1.1.1.1 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "src") {print $(i + 1); exit}}'
}

preflight() {
  [[ "$(id -u)" == 0 ]] || die "needs root (containerd, kubelet and iptables)"
  [[ -n "${KUBECONFIG:-}" && -f "${KUBECONFIG}" ]] || die "KUBECONFIG must name the cluster's admin kubeconfig"
  KUBECONFIG="$(realpath "${KUBECONFIG}")" # the node's configurations name it
  kubectl+=(--kubeconfig "${KUBECONFIG}")
  local missing=()
  for c in containerd ctr runc iptables ipset ip conntrack; do
    command -v "${c}" >/dev/null || missing+=("${c}")
  done
  [[ -x "${CNI_BIN_DIR}/bridge" ]] || missing+=("${CNI_BIN_DIR}/bridge")
  ((${#missing[@]} == 0)) || die "missing ${missing[*]}: install Debian's containerd runc containernetworking-plugins iptables ipset conntrack iproute2 (make node-packages)"
  for b in kubelet kube-proxy coredns kube-router kubectl; do
    [[ -x "${BIN_DIR}/${b}" ]] || die "missing ${BIN_DIR}/${b}: run 'make node-binaries'"
  done
  compgen -G "${IMAGE_DIR}/*.tar" >/dev/null || die "no images in ${IMAGE_DIR}: run 'make images'"
}

# start NAME COMMAND...: run a component in the background, in its own
# session, logging to NODE_DIR/logs/NAME.log.
start() {
  local name="$1"
  shift
  mkdir -p "${NODE_DIR}/logs" "${NODE_DIR}/pids"
  setsid "$@" >"${NODE_DIR}/logs/${name}.log" 2>&1 < /dev/null &
  echo $! > "${NODE_DIR}/pids/${name}.pid"
}

# stop NAME: SIGTERM, then SIGKILL after 20 s.
stop() {
  local pidfile="${NODE_DIR}/pids/$1.pid" pid
  [[ -f "${pidfile}" ]] || return 0
  pid="$(cat "${pidfile}")"
  if kill -0 "${pid}" 2>/dev/null; then
    kill "${pid}" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "${pid}" 2>/dev/null || break; sleep 0.2; done
    kill -9 "${pid}" 2>/dev/null || true
  fi
  rm -f "${pidfile}"
}

running() {
  local pidfile="${NODE_DIR}/pids/$1.pid"
  [[ -f "${pidfile}" ]] && kill -0 "$(cat "${pidfile}")" 2>/dev/null
}

# wait_for SECONDS DESCRIPTION COMMAND...
wait_for() {
  local seconds="$1" what="$2"
  shift 2
  for _ in $(seq $((seconds * 5))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "real node: ${what} not ready after ${seconds}s" >&2
  return 1
}

one_per_machine() {
  if [[ -f "${LOCK}" ]]; then
    local other
    other="$(cat "${LOCK}")"
    if [[ "${other}" != "${NODE_DIR}" ]]; then
      local pidfile
      for pidfile in "${other}"/pids/*.pid; do
        if [[ -f "${pidfile}" ]] && kill -0 "$(cat "${pidfile}")" 2>/dev/null; then
          die "a real node already runs on this machine (state in ${other}); stop it first ('make cluster-down' for the cluster it belongs to, or NODE_DIR=${other} hack/node.sh down)"
        fi
      done
    fi
  fi
  mkdir -p "${RUN_DIR}"
  echo "${NODE_DIR}" > "${LOCK}"
}

write_configs() {
  local ip="$1" ca="$2"
  mkdir -p "${NODE_DIR}/containerd" "${NODE_DIR}/cni/net.d" "${NODE_DIR}/kubelet" "${NODE_DIR}/coredns"
  cat > "${NODE_DIR}/containerd/config.toml" <<EOF
version = 2
root = "${NODE_DIR}/containerd/root"
state = "${RUN_DIR}/containerd-state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "${sock}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE_IMAGE}"
  # Lowering a process's oom_score_adj needs CAP_SYS_RESOURCE, which
  # sandboxed machines may lack: every pod sandbox would fail without this.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${CNI_BIN_DIR}"
    conf_dir = "${NODE_DIR}/cni/net.d"
EOF
  cat > "${NODE_DIR}/cni/net.d/10-memcached-operator.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "_comment": "firewall: lets pod traffic through FORWARD whatever its policy (Docker sets DROP)",
  "name": "memcached-operator-real-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "${BRIDGE}",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "${NODE_DIR}/cni/ipam",
        "ranges": [[{"subnet": "${POD_SUBNET}"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "firewall", "backend": "iptables"},
    {"type": "loopback"}
  ]
}
EOF
  cat > "${NODE_DIR}/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1: kubelets from v1.35 refuse it unless told not to. containerd
# 1.x does not say which cgroup driver it uses (the CRI's RuntimeConfig):
# the kubelet then takes this one, and says so in its log.
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://${sock}
failSwapOn: false
port: ${KUBELET_PORT}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: ${KUBELET_HEALTHZ_PORT}
# The apiserver reaches logs and exec with the cluster's admin certificate.
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: ${ca}}
authorization: {mode: Webhook}
clusterDNS: [${ip}]
clusterDomain: ${CLUSTER_DOMAIN}
volumePluginDir: ${NODE_DIR}/kubelet/volume-plugins
# A development machine: nothing is reserved, nothing is evicted early.
enforceNodeAllocatable: []
localStorageCapacityIsolation: false
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
EOF
  cat > "${NODE_DIR}/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: ${KUBECONFIG}}
hostnameOverride: ${NODE_NAME}
clusterCIDR: ${POD_SUBNET}
# Pods reach a ClusterIP backed by a pod on the same bridge: masquerade so
# that replies come back through the host.
iptables: {masqueradeAll: true}
# Leave the machine's conntrack limits alone.
conntrack: {maxPerCore: 0}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
EOF
  cat > "${NODE_DIR}/coredns/Corefile" <<EOF
.:53 {
    bind ${ip}
    errors
    kubernetes ${CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {
        kubeconfig ${KUBECONFIG}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    # Other names: the machine's resolver, as a cluster's DNS forwards upstream.
    forward . /etc/resolv.conf
    cache 5
}
EOF
}

up() {
  preflight
  local ip ca
  ip="$(node_ip)"
  [[ -n "${ip}" ]] || die "no non-loopback IPv4 address with a default route: the node needs one"
  if running kubelet; then
    log "${NODE_NAME} is already running"
    return
  fi
  one_per_machine
  mkdir -p "${NODE_DIR}"
  ca="${NODE_DIR}/ca.crt"
  local ca_file
  ca_file="$("${kubectl[@]}" config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority}')"
  if [[ -n "${ca_file}" ]]; then
    cp "${ca_file}" "${ca}"
  else
    "${kubectl[@]}" config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' | base64 -d > "${ca}"
  fi
  [[ -s "${ca}" ]] || die "the kubeconfig names no certificate authority"
  write_configs "${ip}" "${ca}"
  sysctl -qw net.ipv4.ip_forward=1 || true
  sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true

  log "starting containerd"
  start containerd containerd --config "${NODE_DIR}/containerd/config.toml"
  wait_for 30 containerd "${ctr[@]}" version || fail containerd "containerd did not start"
  for tar in "${IMAGE_DIR}"/*.tar; do
    "${ctr[@]}" images import "${tar}" >/dev/null || die "importing ${tar}"
  done
  log "images: $("${ctr[@]}" images ls -q | grep -v '^sha256:' | tr '\n' ' ')"

  log "starting kubelet ${NODE_NAME} on ${ip}"
  local taints=()
  [[ -n "${NODE_TAINTS}" ]] && taints=(--register-with-taints "${NODE_TAINTS}")
  start kubelet "${BIN_DIR}/kubelet" --config "${NODE_DIR}/kubelet/config.yaml" \
    --kubeconfig "${KUBECONFIG}" --hostname-override "${NODE_NAME}" --node-ip "${ip}" \
    --root-dir "${RUN_DIR}/kubelet" --cert-dir "${NODE_DIR}/kubelet/pki" \
    --node-labels memcached-operator.example.com/real-node=true "${taints[@]}"
  log "starting kube-proxy"
  start kube-proxy "${BIN_DIR}/kube-proxy" --config "${NODE_DIR}/kube-proxy.yaml"
  log "starting CoreDNS on ${ip}:53"
  start coredns "${BIN_DIR}/coredns" -conf "${NODE_DIR}/coredns/Corefile"

  "${kubectl[@]}" wait --for=create "node/${NODE_NAME}" --timeout=60s >/dev/null || fail kubelet "the kubelet did not register"
  # kube-router's firewall only: the bridge routes the pods and kube-proxy
  # serves the Services. It reads its Node when it starts, so it starts once
  # the kubelet registered it. A pod no NetworkPolicy selects stays open; one
  # a policy selects gets only what the policy admits, the rest is rejected.
  log "starting kube-router (NetworkPolicies)"
  start kube-router "${BIN_DIR}/kube-router" --kubeconfig "${KUBECONFIG}" --hostname-override "${NODE_NAME}" \
    --run-firewall=true --run-router=false --run-service-proxy=false --enable-cni=false \
    --health-port "${KUBE_ROUTER_HEALTH_PORT}"
  "${kubectl[@]}" wait --for=condition=Ready "node/${NODE_NAME}" --timeout=90s >/dev/null || fail kubelet "${NODE_NAME} not Ready"
  wait_for 30 "CoreDNS" busybox nslookup "kubernetes.default.svc.${CLUSTER_DOMAIN}" "${ip}" || fail coredns "CoreDNS does not answer"
  wait_for 30 "kube-proxy" curl -fsS "http://127.0.0.1:10256/healthz" || fail kube-proxy "kube-proxy is not healthy"
  wait_for 30 "kube-router" curl -fsS "http://127.0.0.1:${KUBE_ROUTER_HEALTH_PORT}/healthz" || fail kube-router "kube-router is not healthy"
  log "${NODE_NAME} is Ready (pods ${POD_SUBNET}, DNS ${ip}); logs in ${NODE_DIR}/logs"
}

down() {
  [[ -d "${NODE_DIR}" ]] || { log "not running"; return 0; }
  [[ "$(id -u)" == 0 ]] || die "needs root"
  if [[ -n "${KUBECONFIG:-}" && -f "${KUBECONFIG}" ]]; then
    kubectl+=(--kubeconfig "${KUBECONFIG}")
  else
    kubectl=()
  fi
  # Let the kubelet tear its pods down (containers, sandboxes, CNI), so
  # nothing is left behind in containerd or the network.
  if ((${#kubectl[@]} > 1)) && running kubelet && "${kubectl[@]}" get node "${NODE_NAME}" >/dev/null 2>&1; then
    log "draining: cordon, then delete its pods"
    # Cordoned first, or their controllers' replacements land here again.
    "${kubectl[@]}" cordon "${NODE_NAME}" >/dev/null 2>&1 || true
    "${kubectl[@]}" delete pods --all-namespaces --field-selector "spec.nodeName=${NODE_NAME}" \
      --grace-period=1 --wait=false >/dev/null 2>&1 || true
    for _ in $(seq 150); do
      [[ -z "$("${ctr[@]}" tasks ls -q 2>/dev/null)" ]] && break
      sleep 0.2
    done
    "${kubectl[@]}" delete node "${NODE_NAME}" --wait=false >/dev/null 2>&1 || true
  fi
  stop kubelet
  stop kube-proxy
  stop coredns
  stop kube-router
  if running containerd; then
    # Whatever the kubelet did not stop: kill the tasks, remove containers.
    for id in $("${ctr[@]}" tasks ls -q 2>/dev/null); do
      "${ctr[@]}" tasks kill -s SIGKILL "${id}" >/dev/null 2>&1 || true
    done
    sleep 0.5
    for id in $("${ctr[@]}" containers ls -q 2>/dev/null); do
      "${ctr[@]}" tasks delete -f "${id}" >/dev/null 2>&1 || true
      "${ctr[@]}" containers delete "${id}" >/dev/null 2>&1 || true
    done
  fi
  stop containerd
  "${BIN_DIR}/kube-proxy" --cleanup >/dev/null 2>&1 || true
  remove_chains
  remove_ipsets
  # Network namespaces of sandboxes the kubelet did not tear down, if any:
  # only empty ones (a live namespace belongs to someone else).
  for ns in /run/netns/cni-*; do
    [[ -e "${ns}" ]] || continue
    [[ -z "$(ip netns pids "$(basename "${ns}")" 2>/dev/null)" ]] || continue
    umount "${ns}" 2>/dev/null || true
    rm -f "${ns}"
  done
  ip link del "${BRIDGE}" 2>/dev/null || true
  # The kubelet bind-mounts its root onto itself, pod volumes are tmpfs and
  # containers overlay mounts below the state folders: unmount deepest first.
  local mounts
  mounts="$(findmnt -rn -o TARGET | grep -E "^(${NODE_DIR}|${RUN_DIR})/" | sort -r || true)"
  for m in ${mounts}; do umount -l "${m}" 2>/dev/null || true; done
  rm -rf "${NODE_DIR}"
  if [[ -f "${LOCK}" && "$(cat "${LOCK}")" == "${NODE_DIR}" ]]; then
    rm -rf "${RUN_DIR}"
  fi
  log "${NODE_NAME} is down"
}

# remove_chains deletes the iptables chains the kubelet, kube-proxy and the
# CNI plugins made (KUBE-*, CNI-*) and the rules that jump to them.
remove_chains() {
  local table chain
  for table in filter nat mangle; do
    local rules chains
    rules="$(iptables -t "${table}" -S 2>/dev/null | grep -E -- '-j (KUBE|CNI)-' || true)"
    while read -r rule; do
      # iptables -S quotes arguments with spaces (comments): eval reads them back.
      [[ -n "${rule}" ]] && { eval "iptables -t ${table} ${rule/#-A /-D }" 2>/dev/null || true; }
    done <<<"${rules}"
    chains="$(iptables -t "${table}" -S 2>/dev/null | awk '/^-N (KUBE|CNI)-/ {print $2}' || true)"
    for chain in ${chains}; do iptables -t "${table}" -F "${chain}" 2>/dev/null || true; done
    for chain in ${chains}; do iptables -t "${table}" -X "${chain}" 2>/dev/null || true; done
  done
}

# remove_ipsets destroys the ipsets kube-router made for the NetworkPolicies
# (KUBE-SRC-*, KUBE-DST-*, and their IPv6 twins inet6:KUBE-*), once no
# iptables rule refers to them (remove_chains).
remove_ipsets() {
  command -v ipset >/dev/null || return 0
  local set
  for set in $(ipset list -n 2>/dev/null | grep -E '^(inet6:)?KUBE-' || true); do
    ipset destroy "${set}" 2>/dev/null || true
  done
}

# import_images TAR...: into the running node.
import_images() {
  "${ctr[@]}" version >/dev/null 2>&1 || die "no real node runs here: hack/node.sh up first"
  local tar
  for tar in "$@"; do
    "${ctr[@]}" images import "${tar}" >/dev/null || die "importing ${tar}"
  done
}

case "${1:-}" in
  up) up ;;
  import) shift; import_images "$@" ;;
  down) down ;;
  *) sed -n '2,22p' "$0" >&2; exit 2 ;;
esac
