#!/usr/bin/env bash
# Proves the operator on the older Kubernetes versions it claims: for each
# version, builds its control plane (hack/build-cluster.sh, cached) and runs
# on it the CRD tests (install, admission, defaults, scale subresource), the
# builders' admission table, the controller integration suite and the
# install, RBAC, Helm and OLM tests; then, with CONTAINERS=1 (the default),
# builds a kubelet and kube-proxy of the same version and runs the whole
# end-to-end suite, its container stories on a real node of that version.
#
#   hack/test-compat.sh [VERSION...]   default: versions.env's KUBE_COMPAT_VERSIONS
#
# Environment: CONTAINERS (1, or 0 for the control-plane tests only),
# GO_TEST_FLAGS (passed to go test). Prints how long each part took.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
CONTAINERS="${CONTAINERS:-1}"
# As make builds and tests (the Makefile says why): the packages compiled
# for make test serve here too.
export CGO_ENABLED="${CGO_ENABLED:-0}"
# shellcheck disable=SC2206 # GO_TEST_FLAGS is a list of flags
flags=(${GO_TEST_FLAGS:-})
versions=("$@")
if ((${#versions[@]} == 0)); then
  IFS=, read -r -a versions <<<"$(sed -n 's/^KUBE_COMPAT_VERSIONS=//p' hack/versions.env)"
fi
# The packages whose tests run on an apiserver: the CRD, the builders'
# admission table and fuzz seeds, the apply-skipping rule, the controller
# suite (on a local cluster), and the installs.
packages=(./api/... ./pkg/... ./manifests/...)

timings=()
# timed LABEL COMMAND...: runs the command and records how long it took.
timed() {
  local label="$1" start=${SECONDS}
  shift
  "$@"
  timings+=("${label}: $((SECONDS - start)) s")
  echo "${label}: $((SECONDS - start)) s"
}

for v in "${versions[@]}"; do
  export KUBE_VERSION="${v}" KUBEBUILDER_ASSETS="${ROOT}/bin/k8s/${v}"
  echo "=== Kubernetes ${v}"
  timed "${v} control plane built" hack/build-cluster.sh control-plane
  timed "${v} CRD, controller and install tests" go test -tags integration -count=1 "${flags[@]}" "${packages[@]}"
  if [[ "${CONTAINERS}" == 1 ]]; then
    timed "${v} kubelet and kube-proxy built" hack/build-cluster.sh node
    timed "${v} end-to-end suite with a real node" go test -tags e2e -count=1 -timeout 40m -parallel "${E2E_PARALLEL:-3}" "${flags[@]}" ./e2e/...
  fi
done
unset KUBE_VERSION KUBEBUILDER_ASSETS
printf '%s\n' "${timings[@]}"
