#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite in one configuration.
#   tools/test.sh                     default configuration (build dir: build-test)
#   tools/test.sh -Dtraining=true     any meson options; each set gets its own build dir
#   tools/test.sh --consumer [...]    tests/consumer instead: a project of its own using teeny as a
#                                     Meson subproject (options for teeny: -Dteeny:training=true)
#   tools/test.sh --build-dir [...]   prints the build dir those arguments use, and does nothing else
set -euo pipefail
cd "$(dirname "$0")/.."
print_dir=false
if [ "${1:-}" = --build-dir ]; then print_dir=true; shift; fi
source=. dir=build-test label=""
if [ "${1:-}" = --consumer ]; then
  source=tests/consumer dir=build-consumer label="consumer "
  shift
fi
label+="$*"

for opt in "$@"; do dir+="_$(echo "${opt#-D}" | tr -c 'A-Za-z0-9\n' '-')"; done
if $print_dir; then echo "$dir"; exit 0; fi

# The ONNX importer's libraries, and ONNX's backend test data for its conformance test.
extra=(libonnx-dev libprotobuf-dev libonnx-testdata)
[[ " $* " == *b_sanitize=* ]] && extra+=(libclang-rt-19-dev)
tools/setup.sh "${extra[@]}"
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
if [ ! -f "$dir/build.ninja" ]; then
  CXX=clang++-19 meson setup "$dir" "$source" "$@"
fi
ninja -C "$dir"
status=0
meson test -C "$dir" --print-errorlogs || status=$?

# One closing line in the plain form CI reads: "tests: N passed, N failed, N skipped".
python3 - "$dir/meson-logs/testlog.json" "$label" <<'PY'
import json, sys
counts = {"passed": 0, "failed": 0, "skipped": 0}
for line in open(sys.argv[1]):
    r = json.loads(line)["result"]
    counts["passed" if r in ("OK", "EXPECTEDFAIL") else "skipped" if r == "SKIP" else "failed"] += 1
print(f"configuration [{sys.argv[2] or 'default'}]")
print(f"tests: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
PY
exit $status
