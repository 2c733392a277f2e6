#!/usr/bin/env bash
# make test's suites, in two lanes: the end-to-end suite in front, and
# beside it, at a lower CPU priority, the builds only a few stories and
# the integration suite need, make vulncheck, the unit and integration
# suites and then bench-check. The end-to-end suite mostly waits (on the real node, on
# the apiserver), and the others take what it leaves: run one after the
# other they took about 400 s more. Their output is printed when both lanes
# have ended, the end-to-end suite's first (as it runs); the script fails
# when either lane failed.
#
#   GO_TEST_FLAGS="-v -count=1" hack/test.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

read -r -a flags <<<"${GO_TEST_FLAGS:-}"
beside_log="$(mktemp /tmp/memcached-operator-beside.XXXXXX)"
e2e_binary="$(mktemp /tmp/memcached-operator-e2e.XXXXXX)"

# The end-to-end suite's test binary first, alone: the packages both lanes
# need compile once, not once in each.
go test -tags e2e -c -o "${e2e_binary}" ./e2e
rm -f "${e2e_binary}"

# That lane also builds, first, what only a few stories and the
# integration suite need (Helm; operator-sdk and the scorecard's images;
# promtool) and runs make vulncheck (govulncheck over the operator's source
# and release binaries): cold, these compiles take minutes of both cores,
# which the end-to-end suite leaves them. The stories that need Helm and
# the scorecard wait for the file of that name in the folder BUILT_BESIDE
# names (or that name with .failed).
built="$(mktemp -d /tmp/memcached-operator-built.XXXXXX)"
export BUILT_BESIDE="${built}"
scorecard=true
if [[ "${E2E_REAL_NODE:-1}" != 0 ]]; then
  scorecard="make --no-print-directory scorecard-prerequisites"
fi
# setsid: the lane leads a process group of its own, so that an interrupted
# or failed run stops it whole (its clusters' processes too).
setsid nice -n 10 bash -c '
  built="$1" scorecard="$2"
  shift 2
  # A failed build fails the stories still waiting, not only its own.
  make --no-print-directory helm || { touch "${built}/helm.failed" "${built}/scorecard.failed"; exit 1; }
  touch "${built}/helm"
  ${scorecard} || { touch "${built}/scorecard.failed"; exit 1; }
  touch "${built}/scorecard"
  make --no-print-directory promtool vulncheck &&
    go test -tags integration "$@" ./... &&
    make --no-print-directory bench-check
' lane "${built}" "${scorecard}" "${flags[@]}" >"${beside_log}" 2>&1 &
beside=$!
trap 'kill -- "-${beside}" 2>/dev/null || true; rm -rf "${beside_log}" "${built}"' EXIT

e2e=0
go test -tags e2e -timeout 40m -parallel "${E2E_PARALLEL:-3}" "${flags[@]}" ./e2e/... || e2e=$?
others=0
wait "${beside}" || others=$?
echo "--- the unit and integration suites, then bench-check, run beside the end-to-end suite:"
cat "${beside_log}"
if ((e2e != 0)); then
  echo "the end-to-end suite failed" >&2
fi
if ((others != 0)); then
  echo "the unit or integration suites or bench-check failed" >&2
fi
((e2e == 0 && others == 0))
