#!/usr/bin/env bash
# Runs the operator from source (bin/manager) against a cluster:
#  - the cluster of $KUBECONFIG when it is set;
#  - otherwise the local cluster, created if it is not up (hack/cluster.sh).
# It installs the CRD, starts the operator, applies the sample Memcached and
# says how to look at it. Ctrl-C stops the operator; the cluster is left
# running for the next run ('make cluster-down' deletes it).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=versions.env
source "${ROOT}/hack/versions.env"
KUBECTL="${ROOT}/bin/k8s/kubectl"
CLUSTER_NAME="${CLUSTER_NAME:-memcached-operator}"

KUBECONFIG_WAS_SET="${KUBECONFIG:-}"
if [[ -n "${KUBECONFIG:-}" ]]; then
  echo "Using the cluster of KUBECONFIG=${KUBECONFIG}"
  kubeconfig="${KUBECONFIG}"
else
  "${ROOT}/hack/cluster.sh" up
  kubeconfig="$("${ROOT}/hack/cluster.sh" kubeconfig)"
fi
export KUBECONFIG="${kubeconfig}"

echo "Installing the Memcached CRD"
"${KUBECTL}" apply --server-side --field-manager=memcached-operator-install -f "${ROOT}/manifests/crd/bases"
"${KUBECTL}" wait --for=condition=Established --timeout=60s crd/memcacheds.cache.example.com

flags=()
real_node=0
if [[ -z "${KUBECONFIG_WAS_SET:-}" && "${REAL_NODE:-0}" == 1 ]]; then
  real_node=1
  # The real node pulls nothing: memcached runs from the image hack/images.sh made.
  flags+=(--memcached-image="${LOCAL_MEMCACHED_IMAGE}" --exporter-image="${LOCAL_EXPORTER_IMAGE}"
    --reloader-image="${LOCAL_OPERATOR_IMAGE}")
fi
if [[ -t 1 ]]; then
  # A person reads this: one line per record, not JSON (the container keeps JSON).
  flags+=(--zap-encoder=console)
fi

echo "Starting the operator (bin/manager)"
"${ROOT}/bin/manager" \
  --metrics-bind-address="${METRICS_ADDR:-127.0.0.1:8080}" --metrics-secure=false \
  --health-probe-bind-address="${PROBE_ADDR:-127.0.0.1:8081}" \
  "${flags[@]}" "$@" &
manager=$!

stop() {
  echo
  echo "Stopping the operator"
  kill -TERM "${manager}" 2>/dev/null || true
  wait "${manager}" 2>/dev/null || true
  echo "The cluster is still running. Delete it with: make cluster-down CLUSTER_NAME=${CLUSTER_NAME}"
  exit 0
}
trap stop INT TERM

# Apply the sample once the operator is up.
for _ in $(seq 1 60); do
  if curl -sf "http://${PROBE_ADDR:-127.0.0.1:8081}/readyz" >/dev/null 2>&1; then break; fi
  if ! kill -0 "${manager}" 2>/dev/null; then echo "the operator exited" >&2; exit 1; fi
  sleep 0.5
done
"${KUBECTL}" apply --server-side --field-manager=kubectl -n default -f "${ROOT}/manifests/samples/cache_v1alpha1_memcached.yaml"

if [[ "${real_node}" == 1 ]]; then
  if "${KUBECTL}" wait -n default --for=condition=Available --timeout=120s memcached/memcached-sample >/dev/null; then
    address="$("${KUBECTL}" get -n default memcached/memcached-sample -o jsonpath='{.status.service.address}')"
    host="${address%:*}" port="${address##*:}"
    reach="memcached-sample serves at ${address} (real containers on the real node).
Store and read a value from a pod:

  kubectl run client -n default -i --rm --restart=Never --image=${LOCAL_CLIENT_IMAGE} --image-pull-policy=Never -- -c \"printf 'set greeting 0 0 5\\r\\nhello\\r\\nget greeting\\r\\nquit\\r\\n' | nc ${host} ${port}\"
"
  else
    why="$("${KUBECTL}" get -n default memcached/memcached-sample -o jsonpath='{.status.conditions[?(@.type=="Available")].message}')"
    reach="memcached-sample is not Available after 2 minutes: ${why:-no status yet}
(kubectl get memcached shows its reason, kubectl describe memcached memcached-sample the rest)."
  fi
elif [[ -n "${KUBECONFIG_WAS_SET:-}" ]]; then
  reach="memcached-sample runs on the cluster of KUBECONFIG; its address is in status.service.address."
else
  if [[ "$(uname -s)" != Linux ]]; then
    why="a real node runs only on Linux"
  elif [[ "$(id -u)" != 0 ]]; then
    why="a real node needs root (containerd, a kubelet, iptables rules): make cluster-down, then make run as root"
  else
    why="REAL_NODE=0 was asked for: make cluster-down, then make run without it"
  fi
  reach="The local cluster's nodes are fake (kwok): ${why}.
The sample's pods are scheduled and turn Ready, but run no containers, so there is no
memcached to talk to; everything the operator does to the API (Deployment, Service, budget,
status, scaling) can be watched."
fi

cat <<MSG

The operator is running. ${reach}

In another shell:

  export KUBECONFIG=${kubeconfig}
  export PATH=${ROOT}/bin/k8s:\$PATH
  kubectl get memcached -o wide
  kubectl get statefulset,pods -l cache.example.com/memcached=memcached-sample
  kubectl scale memcached/memcached-sample --replicas=2

Press Ctrl-C to stop the operator.
MSG
wait "${manager}"
