#!/usr/bin/env bash
# Mutation-tests each package named (pkg/<name>) with gremlins: each mutant
# of the code its tests cover is run against the package's unit and
# integration tests (those need memcached on the host, no cluster; but
# pkg/desired's, which need an apiserver: its unit tests only). Writes bin/mutation/<name>.json and a line a package,
# and fails when a package's efficacy (killed over killed and lived) is
# under MUTATION_EFFICACY percent.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CGO_ENABLED=0
# gremlins times each mutant's run by its coverage run: a cached test
# result would make that a few milliseconds, and every mutant time out.
export GOFLAGS="${GOFLAGS:+${GOFLAGS} }-count=1"
threshold=${MUTATION_EFFICACY:-85}
# gremlins kills the test binary of a mutant that runs past its time, not
# the memcached the test started: those are stopped after each package.
stop_left() { pkill -f "memcached.*/gremlins-" || true; }
trap stop_left EXIT
out=bin/mutation
mkdir -p "${out}"
failed=()
for name in "$@"; do
  start=${SECONDS}
  # pkg/desired's integration tests need an apiserver: its unit tests only.
  # Packages whose tests start memcached on fixed addresses run one
  # mutant at a time: two runs of their tests at once collide.
  tags=integration workers=2
  [[ ${name} == desired ]] && tags=none
  [[ ${name} == move || ${name} == warm || ${name} == reload ]] && workers=1
  bin/gremlins unleash --silent --tags "${tags}" --workers "${workers}" --timeout-coefficient 5 \
    -o "${out}/${name}.json" "./pkg/${name}" >/dev/null || true
  stop_left
  python3 - "${out}/${name}.json" "${name}" "$((SECONDS - start))" "${threshold}" <<'PY' || failed+=("${name}")
import json, sys
path, name, took, threshold = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
d = json.load(open(path))
count = {}
for f in d["files"]:
    for m in f["mutations"]:
        count[m["status"]] = count.get(m["status"], 0) + 1
killed, lived = count.get("KILLED", 0), count.get("LIVED", 0)
efficacy = 100.0 * killed / (killed + lived) if killed + lived else 100.0
print(f"pkg/{name}: {efficacy:.1f}% efficacy ({killed} killed, {lived} lived, "
      f"{count.get('NOT COVERED', 0)} not covered, {count.get('TIMED OUT', 0)} timed out), {took}s")
for f in d["files"]:
    for m in f["mutations"]:
        if m["status"] == "LIVED":
            print(f"  lived: {m['type']} at pkg/{name}/{f['file_name']}:{m['line']}:{m['column']}")
sys.exit(0 if efficacy >= threshold else 1)
PY
done
if ((${#failed[@]})); then
  echo "under ${threshold}% efficacy: ${failed[*]}" >&2
  exit 1
fi
