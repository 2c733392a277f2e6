#!/usr/bin/env bash
# Runs operator-sdk scorecard (bin/operator-sdk, from the module
# hack/tools/scorecard pins) on an OLM bundle folder, against a cluster
# whose pods can run the scorecard's images: the local cluster's real node.
#
#   hack/scorecard.sh [BUNDLE_DIR]     (default manifests/bundle)
#
# It imports the scorecard's images (hack/images.sh) into the machine's real
# node, and runs the tests of the bundle's config (tests/scorecard) in a
# namespace of their own whose pods go to that node: the namespace carries
# the node selector and toleration the apiserver's PodNodeSelector and
# PodTolerationRestriction admission plugins give its pods (hack/cluster.sh
# enables them; the scorecard's pods have neither). It fails when any test
# does not pass, and prints each test's result.
#
# Environment:
#   KUBECONFIG       the cluster (default: the local cluster, .local/$CLUSTER_NAME.kubeconfig)
#   SCORECARD_WAIT   how long the tests may take (default 180s)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=versions.env
source "${ROOT}/hack/versions.env"
BUNDLE="$(realpath "${1:-${ROOT}/manifests/bundle}")"
IMAGE_DIR="${IMAGE_DIR:-${ROOT}/bin/images}"
KUBECONFIG="${KUBECONFIG:-${ROOT}/.local/${CLUSTER_NAME:-memcached-operator}.kubeconfig}"
export KUBECONFIG
KUBECTL="${ROOT}/bin/k8s/kubectl"
SDK="${ROOT}/bin/operator-sdk"
REAL_NODE_LABEL=memcached-operator.example.com/real-node
WAIT="${SCORECARD_WAIT:-180s}"

[[ -x "${SDK}" ]] || { echo "${SDK} is missing: make scorecard builds it" >&2; exit 1; }
[[ -f "${KUBECONFIG}" ]] || { echo "no cluster: ${KUBECONFIG} does not exist (make cluster-up)" >&2; exit 1; }

# The images the bundle's config names are the ones built here.
config="${BUNDLE}/tests/scorecard/config.yaml"
if grep -o 'image: [^ ]*' "${config}" | grep -vqx "image: ${SCORECARD_TEST_IMAGE}"; then
  echo "${config} names a test image other than ${SCORECARD_TEST_IMAGE}: make bundle" >&2
  exit 1
fi
tars=()
for image in "${SCORECARD_TEST_IMAGE}" "${SCORECARD_UNTAR_IMAGE}"; do
  tar="${IMAGE_DIR}/$(tr '/:' '__' <<<"${image}").tar"
  [[ -f "${tar}" ]] || { echo "${tar} is missing: make images" >&2; exit 1; }
  tars+=("${tar}")
done
"${ROOT}/hack/node.sh" import "${tars[@]}"

ns="scorecard-$$-${RANDOM}"
"${KUBECTL}" create namespace "${ns}" >/dev/null
trap '"${KUBECTL}" delete namespace "${ns}" --wait=false >/dev/null 2>&1 || true' EXIT
"${KUBECTL}" annotate namespace "${ns}" >/dev/null \
  "scheduler.alpha.kubernetes.io/node-selector=${REAL_NODE_LABEL}=true" \
  "scheduler.alpha.kubernetes.io/defaultTolerations=[{\"key\":\"${REAL_NODE_LABEL}\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}]"
# The pods run as the namespace's default ServiceAccount, made by the
# controller manager shortly after the namespace.
for _ in $(seq 60); do
  "${KUBECTL}" -n "${ns}" get serviceaccount default >/dev/null 2>&1 && break
  sleep 0.5
done

# The whole report (each test's log holds the bundle's objects, printed in
# full) goes to a file; here each test's name, state and errors.
log="${TMPDIR:-/tmp}/memcached-operator-scorecard-${ns}.log"
echo "operator-sdk scorecard ${BUNDLE} in namespace ${ns} (report: ${log})"
rc=0
"${SDK}" scorecard "${BUNDLE}" --kubeconfig "${KUBECONFIG}" --namespace "${ns}" \
  --untar-image "${SCORECARD_UNTAR_IMAGE}" --wait-time "${WAIT}" --output text >"${log}" 2>&1 || rc=$?
awk '/^Entrypoint:/ {print; next}
  /^\tState:/ {print; next}
  /^\t(Errors|Suggestions):/ {keep = 1; print; next}
  keep && /^\t\t/ {print; next}
  {keep = 0}' "${log}"
if ((rc != 0)); then
  grep -q '^Entrypoint:' "${log}" || tail -n 20 "${log}"
  echo "operator-sdk scorecard failed (exit ${rc}): a test did not pass" >&2
  exit "${rc}"
fi
echo "every scorecard test passed"
