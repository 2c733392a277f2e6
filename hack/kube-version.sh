# Sourced by the scripts in hack/ in place of versions.env: reads
# hack/versions.env, then resolves which Kubernetes version to run.
#
# KUBE_VERSION in the environment picks one of KUBE_COMPAT_VERSIONS instead
# of the default (the newest, versions.env's KUBE_VERSION). A compat
# version's control plane, kubelet and kube-proxy are built from
# hack/tools/kubernetes-v1.MINOR into bin/k8s/KUBE_VERSION, which links the
# programs every version shares (etcd, kwok, kwokctl, kubectl, CoreDNS) from
# bin/k8s. Its real node runs a kubelet of the same version: a kubelet may
# not be newer than its apiserver.
#
# Sets KUBE_VERSION, KUBE_MINOR, KUBE_TOOLS_DIR
# (the tools module's folder under hack/tools), KUBE_BIN_DIR, SHARED_BIN_DIR,
# DEFAULT_KUBE_VERSION and DEFAULT_KUBE_MINOR.
_requested_kube_version="${KUBE_VERSION:-}"
# shellcheck source=versions.env
source "${ROOT}/hack/versions.env"
SHARED_BIN_DIR="${ROOT}/bin/k8s"
# The default version: what the shared programs (kubectl, kwok) are built as.
DEFAULT_KUBE_VERSION="${KUBE_VERSION}"
DEFAULT_KUBE_MINOR="${KUBE_MINOR}"
if [[ -z "${_requested_kube_version}" || "${_requested_kube_version}" == "${KUBE_VERSION}" ]]; then
  KUBE_TOOLS_DIR=kubernetes
  KUBE_BIN_DIR="${SHARED_BIN_DIR}"
else
  case ",${KUBE_COMPAT_VERSIONS}," in
    *",${_requested_kube_version},"*) ;;
    *)
      echo "KUBE_VERSION=${_requested_kube_version} is not built here: ${KUBE_VERSION} (the default) or one of ${KUBE_COMPAT_VERSIONS}" >&2
      exit 2
      ;;
  esac
  KUBE_VERSION="${_requested_kube_version}"
  KUBE_MINOR="$(cut -d. -f2 <<<"${KUBE_VERSION}")"
  KUBE_TOOLS_DIR="kubernetes-v1.${KUBE_MINOR}"
  KUBE_BIN_DIR="${SHARED_BIN_DIR}/${KUBE_VERSION}"
fi
unset _requested_kube_version
