#!/usr/bin/env bash
# Builds the images the real node runs, without any registry, and saves each
# as a tar file in IMAGE_DIR (default bin/images) for hack/node.sh to import
# into the node's containerd. An image is rebuilt only when its inputs
# changed; when every image is current, no Docker engine is needed at all.
#
#   localhost/pause:3.10          the pod sandbox: build/pause/linux/pause.c of the
#                                 k8s.io/kubernetes module, compiled static
#   localhost/memcached:1.6.18    Debian's memcached package: the binary, the
#                                 libraries it links, a passwd entry for uid 1001;
#                                 also tagged localhost/memcached:1.6
#   localhost/busybox:1.35        Debian's busybox-static, for client pods
#   localhost/memcached-exporter:v0.14.4
#                                 the Prometheus memcached exporter, built static
#                                 from its Go module (hack/tools/exporter)
#   quay.io/operator-framework/scorecard-test:v1.42.2
#                                 the scorecard's test program, built static from
#                                 the operator-sdk module hack/tools/scorecard pins,
#                                 under the name the bundle's scorecard config uses
#   localhost/scorecard-untar:1.35
#                                 Debian's busybox-static without an entrypoint: the
#                                 scorecard runs `tar` in it to unpack the bundle
#   memcached-operator:e2e        the project's Dockerfile's last stage, unchanged
#                                 but for the COPY of the programs, which are built
#                                 on the host by its builder stage's go command;
#                                 on a local stand-in for its base (below)
#
# With image names as arguments, only those are built; `bundle` (the OLM
# bundle image $BUNDLE_IMG, FROM scratch) and the scorecard's two
# (`scorecard-test`, `scorecard-untar`: make scorecard-images) are built
# only when named.
#
# The Dockerfile's base cannot be pulled here, so a stand-in is imported
# under the name it uses, and only when no image of that name exists (a real
# one is never replaced): gcr.io/distroless/static:nonroot (user and group
# nonroot 65532, CA certificates, tzdata, /tmp), labelled
# memcached-operator.stand-in=true. Users who build the image elsewhere get
# the real base.
#
# The Docker engine in use is the one `docker info` reaches; when there is
# none and this runs as root, a dockerd is started for the build (without
# bridge or iptables rules of its own) and stopped afterwards.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=versions.env
source "${ROOT}/hack/versions.env"
IMAGE_DIR="${IMAGE_DIR:-${ROOT}/bin/images}"
STATE_DIR="${STATE_DIR:-${ROOT}/.local}"
KUBE_TOOLS="${ROOT}/hack/tools/kubernetes"
STANDIN_LABEL="memcached-operator.stand-in=true"
export DOCKER_BUILDKIT=0

mkdir -p "${IMAGE_DIR}"
work="$(mktemp -d)"
started_dockerd=""
cleanup() {
  rm -rf "${work}"
  if [[ -n "${started_dockerd}" ]]; then
    kill "${started_dockerd}" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "${started_dockerd}" 2>/dev/null || break; sleep 0.2; done
  fi
}
trap cleanup EXIT

docker_ready() {
  [[ -n "${started_dockerd}" ]] && return 0
  if docker info >/dev/null 2>&1; then return 0; fi
  if [[ "$(id -u)" != 0 ]] || ! command -v dockerd >/dev/null; then
    echo "no Docker engine answers and none can be started (needs root and Debian's docker.io)" >&2
    exit 1
  fi
  mkdir -p "${STATE_DIR}"
  echo "starting dockerd for the build (log: ${STATE_DIR}/dockerd.log)"
  dockerd --iptables=false --ip-forward=false --bridge=none >"${STATE_DIR}/dockerd.log" 2>&1 &
  started_dockerd=$!
  for _ in $(seq 100); do
    docker info >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "dockerd did not start; see ${STATE_DIR}/dockerd.log" >&2
  exit 1
}

# current NAME HASH: the saved tar of NAME was made from inputs hashing to HASH.
current() {
  local file="${IMAGE_DIR}/$(tr '/:' '__' <<<"$1")"
  [[ -f "${file}.tar" && -f "${file}.stamp" && "$(cat "${file}.stamp")" == "$2" ]]
}

# save NAME HASH [TAG...]: write NAME's tar (with its other tags) and its stamp.
save() {
  local file="${IMAGE_DIR}/$(tr '/:' '__' <<<"$1")"
  docker save "$1" "${@:3}" -o "${file}.tar.tmp"
  mv "${file}.tar.tmp" "${file}.tar"
  echo "$2" > "${file}.stamp"
  echo "image ${1} ready"
}

# import_rootfs NAME DIR CHANGES...: a one-layer image of DIR.
import_rootfs() {
  local name="$1" dir="$2"
  shift 2
  local changes=()
  for c in "$@"; do changes+=(--change "${c}"); done
  tar -C "${dir}" --numeric-owner -c . | docker import "${changes[@]}" - "${name}" >/dev/null
}

hash_of() { cat "$@" | sha256sum | cut -d' ' -f1; }

passwd_files() { # DIR USER UID
  mkdir -p "$1/etc"
  printf 'root:x:0:0:root:/root:/sbin/nologin\n%s:x:%s:%s:%s:/home/%s:/sbin/nologin\n' "$2" "$3" "$3" "$2" "$2" > "$1/etc/passwd"
  printf 'root:x:0:\n%s:x:%s:\n' "$2" "$3" > "$1/etc/group"
}

need_host_file() {
  if [[ ! -e "$1" ]]; then
    echo "$1 is missing: install Debian's $2 package (apt-get install $2)" >&2
    exit 1
  fi
}

pause() {
  local name="${PAUSE_IMAGE}" src
  src="$(cd "${KUBE_TOOLS}" && go mod download k8s.io/kubernetes && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c"
  local h
  h="$(hash_of "${src}" <(gcc --version))"
  current "${name}" "${h}" && { echo "up to date: ${name}"; return; }
  docker_ready
  mkdir -p "${work}/pause"
  gcc -Os -static -DVERSION="${PAUSE_IMAGE##*:}-local" -o "${work}/pause/pause" "${src}"
  strip "${work}/pause/pause"
  import_rootfs "${name}" "${work}/pause" 'ENTRYPOINT ["/pause"]' 'USER 65535:65535'
  save "${name}" "${h}"
}

memcached() {
  local name="${LOCAL_MEMCACHED_IMAGE}" bin=/usr/bin/memcached
  need_host_file "${bin}" memcached
  local libs h
  libs="$(ldd "${bin}" | awk '/=>/ {print $3} /ld-linux/ {print $1}' | sort -u)"
  # shellcheck disable=SC2086
  h="$(hash_of "${bin}" ${libs} <(echo "${name} ${LOCAL_MEMCACHED_IMAGE_MINOR}"))"
  current "${name}" "${h}" && { echo "up to date: ${name}"; return; }
  docker_ready
  local dir="${work}/memcached"
  mkdir -p "${dir}/usr/bin" "${dir}/tmp"
  cp "${bin}" "${dir}/usr/bin/memcached"
  for l in ${libs}; do
    mkdir -p "${dir}$(dirname "${l}")"
    cp -L "${l}" "${dir}${l}"
  done
  chmod 1777 "${dir}/tmp"
  passwd_files "${dir}" memcache 1001
  import_rootfs "${name}" "${dir}" 'ENTRYPOINT ["/usr/bin/memcached"]' 'USER 1001:1001' 'ENV PATH=/usr/bin:/bin'
  # A second name of the same image, as registries tag a minor release: an
  # image change without a second build.
  docker tag "${name}" "${LOCAL_MEMCACHED_IMAGE_MINOR}"
  save "${name}" "${h}" "${LOCAL_MEMCACHED_IMAGE_MINOR}"
}

# busybox_tree DIR BIN: a root of Debian's busybox-static BIN, with a link
# for each of its programs in /bin, and /tmp.
busybox_tree() {
  mkdir -p "$1/bin" "$1/tmp"
  cp "$2" "$1/bin/busybox"
  local app
  for app in $("$2" --list); do
    [[ "${app}" == busybox ]] || ln -sf busybox "$1/bin/${app}"
  done
  chmod 1777 "$1/tmp"
}

busybox() {
  local name="${LOCAL_CLIENT_IMAGE}" bin=/bin/busybox
  need_host_file "${bin}" busybox-static
  local h
  h="$(hash_of "${bin}")"
  current "${name}" "${h}" && { echo "up to date: ${name}"; return; }
  docker_ready
  local dir="${work}/busybox"
  busybox_tree "${dir}" "${bin}"
  passwd_files "${dir}" nobody 65534
  import_rootfs "${name}" "${dir}" 'ENTRYPOINT ["/bin/sh"]' 'ENV PATH=/bin'
  save "${name}" "${h}"
}

exporter() {
  local name="${LOCAL_EXPORTER_IMAGE}" tools="${ROOT}/hack/tools/exporter" h
  h="$(hash_of "${tools}/go.mod" "${tools}/go.sum" <(go version) <(echo "${name}"))"
  current "${name}" "${h}" && { echo "up to date: ${name}"; return; }
  docker_ready
  local dir="${work}/exporter"
  mkdir -p "${dir}/bin" "${dir}/tmp"
  (cd "${tools}" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${dir}/bin/memcached_exporter" \
    github.com/prometheus/memcached_exporter/cmd/memcached_exporter)
  chmod 1777 "${dir}/tmp"
  passwd_files "${dir}" nobody 65534
  import_rootfs "${name}" "${dir}" 'ENTRYPOINT ["/bin/memcached_exporter"]' 'USER 65534:65534' 'EXPOSE 9150'
  save "${name}" "${h}"
}

scorecard_test() {
  local name="${SCORECARD_TEST_IMAGE}" tools="${ROOT}/hack/tools/scorecard" h version
  version="$(sed -n 's|^require github.com/operator-framework/operator-sdk ||p' "${tools}/go.mod")"
  if [[ "${name##*:}" != "${version}" ]]; then
    echo "SCORECARD_TEST_IMAGE (${name}) is not of the operator-sdk version hack/tools/scorecard pins (${version})" >&2
    exit 1
  fi
  h="$(hash_of "${tools}/go.mod" "${tools}/go.sum" <(go version) <(echo "${name}"))"
  current "${name}" "${h}" && { echo "up to date: ${name}"; return; }
  docker_ready
  local dir="${work}/scorecard-test"
  mkdir -p "${dir}/usr/local/bin" "${dir}/tmp" "${dir}/opt/scorecard-test"
  (cd "${tools}" && CGO_ENABLED=0 go build -trimpath -tags containers_image_openpgp -ldflags "-s -w" \
    -o "${dir}/usr/local/bin/scorecard-test" github.com/operator-framework/operator-sdk/images/scorecard-test)
  chmod 1777 "${dir}/tmp"
  passwd_files "${dir}" scorecard-test 1001
  chown 1001:0 "${dir}/opt/scorecard-test"
  # As the module's images/scorecard-test/Dockerfile makes it, on no base.
  import_rootfs "${name}" "${dir}" 'ENTRYPOINT ["/usr/local/bin/scorecard-test"]' 'USER 1001' \
    'ENV PATH=/usr/local/bin HOME=/opt/scorecard-test' 'WORKDIR /opt/scorecard-test'
  save "${name}" "${h}"
}

scorecard_untar() {
  local name="${SCORECARD_UNTAR_IMAGE}" bin=/bin/busybox
  need_host_file "${bin}" busybox-static
  local h
  h="$(hash_of "${bin}" <(echo "${name}"))"
  current "${name}" "${h}" && { echo "up to date: ${name}"; return; }
  docker_ready
  local dir="${work}/scorecard-untar"
  busybox_tree "${dir}" "${bin}"
  import_rootfs "${name}" "${dir}" 'ENV PATH=/bin'
  save "${name}" "${h}"
}

# standin NAME BUILD_FUNCTION: import a stand-in unless an image NAME exists
# that is not one of ours.
standin() {
  local name="$1"
  if docker image inspect "${name}" >/dev/null 2>&1; then
    if [[ "$(docker image inspect -f '{{index .Config.Labels "memcached-operator.stand-in"}}' "${name}")" != true ]]; then
      echo "using the existing ${name}"
      return
    fi
  fi
  echo "importing a local stand-in for ${name}"
  "$2" "${name}"
}

distroless_standin() {
  local dir="${work}/distroless"
  mkdir -p "${dir}/etc/ssl/certs" "${dir}/usr/share" "${dir}/tmp" "${dir}/home/nonroot"
  cp -L /etc/ssl/certs/ca-certificates.crt "${dir}/etc/ssl/certs/"
  cp -a /usr/share/zoneinfo "${dir}/usr/share/zoneinfo"
  chmod 1777 "${dir}/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > "${dir}/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' > "${dir}/etc/group"
  chown 65532:65532 "${dir}/home/nonroot"
  import_rootfs "$1" "${dir}" 'USER 65532:65532' 'WORKDIR /home/nonroot' "LABEL ${STANDIN_LABEL}"
}

operator() {
  local name="${LOCAL_OPERATOR_IMAGE}" h
  # The inputs of the Dockerfile: what it copies, and the Go toolchain that
  # builds it.
  h="$(cd "${ROOT}" && hash_of Dockerfile go.mod go.sum $(git ls-files -co --exclude-standard api applyconfig cmd pkg | sort) <(go version))"
  current "${name}" "${h}" && { echo "up to date: ${name}"; return; }
  # The programs the Dockerfile's builder stage builds, from its go build
  # line: built here, on the host, by the same go command without
  # -trimpath, so that they share the build cache with `make build` and the
  # tests (in a container every dependency compiled again: 290 to 570 s
  # cold). The Dockerfile's inputs are checked by cmd's TestDockerfile.
  local programs
  programs="$(sed -n 's|^RUN CGO_ENABLED=0 go build -trimpath -o bin/ \(.*\) &&.*$|\1|p' "${ROOT}/Dockerfile")"
  if [[ -z "${programs}" ]]; then
    echo "the Dockerfile has no line 'RUN CGO_ENABLED=0 go build -trimpath -o bin/ PROGRAMS && ...' to take the programs from" >&2
    exit 1
  fi
  docker_ready
  standin gcr.io/distroless/static:nonroot distroless_standin
  local dir="${work}/operator" start=${SECONDS}
  mkdir -p "${dir}"
  # shellcheck disable=SC2086
  (cd "${ROOT}" && CGO_ENABLED=0 go build -o "${dir}/" ${programs})
  mv "${dir}/cmd" "${dir}/manager"
  echo "built the operator's programs in $((SECONDS - start))s"
  # The Dockerfile's last stage, unchanged but for its COPY, which takes the
  # programs from the folder they were built in instead of the builder stage.
  awk '/^FROM /{stage=""} {stage=stage $0 "\n"} END{printf "%s", stage}' "${ROOT}/Dockerfile" |
    sed -E '/^COPY --from=builder /{s#--from=builder ##; s#/workspace/bin/##g}' >"${dir}/Dockerfile"
  if ! grep -q '^COPY manager ' "${dir}/Dockerfile"; then
    echo "the Dockerfile's last stage does not copy /workspace/bin/manager first from the builder stage:" >&2
    cat "${dir}/Dockerfile" >&2
    exit 1
  fi
  echo "building ${name} from the Dockerfile's last stage"
  docker build --pull=false --network host -t "${name}" "${dir}"
  save "${name}" "${h}"
}

# bundle: the OLM bundle image of manifests/bundle (make bundle-build), not
# one the real node runs: built only when asked for by name.
bundle() {
  local name="${BUNDLE_IMG:?BUNDLE_IMG names the bundle image}" dir="${ROOT}/manifests/bundle" h
  h="$(cd "${ROOT}" && hash_of $(git ls-files -co --exclude-standard manifests/bundle | sort) <(echo "${name}"))"
  current "${name}" "${h}" && { echo "up to date: ${name}"; return; }
  docker_ready
  docker build --pull=false -f "${dir}/bundle.Dockerfile" -t "${name}" "${dir}"
  save "${name}" "${h}"
}

if (($# == 0)); then
  set -- pause memcached busybox exporter operator
fi
for image in "$@"; do
  case "${image}" in
    pause | memcached | busybox | exporter | operator | bundle) "${image}" ;;
    scorecard-test | scorecard-untar) "${image//-/_}" ;;
    *) echo "unknown image ${image}: pause, memcached, busybox, exporter, scorecard-test, scorecard-untar, operator or bundle" >&2; exit 1 ;;
  esac
done
