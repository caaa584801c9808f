#!/usr/bin/env bash
# Instructions per forward of the typed MLP and of the run-time path at batch 1 (and 64), counted
# by callgrind: repeatable where timings are not. Runs bench-fixed under valgrind and divides each
# forward function's inclusive instruction count by its calls.
#
#   bench/fixed_instructions.sh [BUILD_DIR]     (default build-bench: --buildtype=release -Dbench=true)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-bench}
out=$(mktemp /tmp/teeny-callgrind.XXXXXX)
trap 'rm -f "$out"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$out" "$build/bench/bench-fixed" \
  --benchmark_filter="${FILTER:-mlp/batch:1/}" --benchmark_min_time=0.05 > /dev/null 2>&1
python3 - "$out" <<'PY'
import collections, re, sys
lines = open(sys.argv[1]).read().split("\n")
names, calls, cost = {}, collections.Counter(), collections.Counter()
callee = None
for i, line in enumerate(lines):
    m = re.match(r"(c?fn)=\((\d+)\)(?: (.*))?", line)
    if m:
        kind, idx, name = m.groups()
        if name:
            names[idx] = name
        if kind == "cfn":
            callee = idx
        continue
    m = re.match(r"calls=(\d+)", line)
    if m and callee:
        calls[callee] += int(m.group(1))
        cost[callee] += int(lines[i + 1].split()[1])
# The models' forward functions (mangled): the typed Model's and LoadedModel's.
for idx, n in sorted(calls.items(), key=lambda kv: names.get(kv[0], "")):
    name = names.get(idx, "")
    if "forward" not in name:
        continue
    if name.startswith("_ZN5teeny5fixedW5teenyW5fixed5Model"):
        print(f"typed model:   {cost[idx] // n:>10,} instructions per forward ({n} forwards)")
    elif name.startswith("_ZN5teenyW5teenyW7runtime11LoadedModel"):
        print(f"run-time path: {cost[idx] // n:>10,} instructions per forward ({n} forwards)")
PY
