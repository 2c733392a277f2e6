#!/usr/bin/env bash
# Reads the log of `make test GO_TEST_FLAGS=-v` and fails when any test was
# skipped, when a test of the end-to-end suite (every func Test... of e2e/)
# did not run and pass, or when the container stories (features labelled
# needs=containers, run on the real node) did not: a run without them
# proves nothing about the pods.
#
#   hack/ci-check-log.sh TEST-LOG
#   hack/ci-check-log.sh --no-stories TEST-LOG   skips only: for a log of
#                                                tests without the stories
set -euo pipefail
stories=1
if [[ "${1:-}" == --no-stories ]]; then
  stories=0
  shift
fi
log="$(realpath "${1:?usage: $0 [--no-stories] TEST-LOG}")"

if skipped="$(grep -E -- '--- SKIP' "${log}")"; then
  echo "tests were skipped; a skipped test is not a pass:" >&2
  echo "${skipped}" >&2
  exit 1
fi
if ((stories == 0)); then
  echo "no test skipped"
  exit 0
fi
# Every test of the end-to-end suite ran and passed: one left out (a
# filter, a build tag, a panic before it) is not a pass.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
missing=()
for test in $(grep -ho '^func Test[A-Za-z0-9_]*' e2e/*.go | sed 's/^func //' | sort -u); do
  [[ ${test} == TestMain ]] && continue
  grep -qE -- "--- PASS: ${test} " "${log}" || missing+=("${test}")
done
if ((${#missing[@]})); then
  echo "tests of the end-to-end suite did not run and pass: ${missing[*]}" >&2
  exit 1
fi
# One story per kind of container behaviour; each must have run and passed.
for story in TestRollingImageChangeKeepsServing TestSecretRotationKeepsServing TestMemcachedServes TestCausesAreNamed TestNetworkPolicyAdmitsOnlyItsClients; do
  if ! grep -qE -- "--- PASS: ${story} " "${log}"; then
    echo "the container story ${story} did not run and pass" >&2
    exit 1
  fi
done
echo "no test skipped; the container stories ran"
