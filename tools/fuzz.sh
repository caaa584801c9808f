#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ (build dir build-fuzz: ASan + UBSan, every finding
# fatal) and runs one, or each in turn, for SECONDS from its committed seed corpus.
#   tools/fuzz.sh TARGET SECONDS     TARGET: safetensors, json, idx, graph, npy, onnx, or all
#   TEENY_FUZZ_BUILD=DIR tools/fuzz.sh ...   use the targets already built in DIR instead
# New corpus entries go to a temporary directory, never into the repository; a finding stops the
# run with a non-zero exit and the path of the input that caused it (replay: BUILD/tests/fuzz/
# fuzz_TARGET that-file).
set -euo pipefail
cd "$(dirname "$0")/.."
all=(safetensors json idx graph npy onnx)
if [ $# -ne 2 ] || ! [[ "$2" =~ ^[0-9]+$ ]]; then
  echo "usage: tools/fuzz.sh {${all[*]// /|}|all} SECONDS" >&2
  exit 2
fi
if [ "$1" = all ]; then
  targets=("${all[@]}")
elif [[ " ${all[*]} " == *" $1 "* ]]; then
  targets=("$1")
else
  echo "tools/fuzz.sh: unknown target '$1' (targets: ${all[*]}, all)" >&2
  exit 2
fi
seconds=$2

# TEENY_FUZZ_BUILD: a build that already has the targets (teeny's build dir, or
# <consumer build>/subprojects/teeny): .ci/run fuzzes in the sanitized build its tests ran in.
dir=${TEENY_FUZZ_BUILD:-}
if [ -z "$dir" ]; then
  # libFuzzer and the sanitizer runtimes for clang-19; the importer's libraries and seed data
  tools/setup.sh libclang-rt-19-dev libonnx-dev libprotobuf-dev libonnx-testdata
  dir=build-fuzz
  if [ ! -f "$dir/build.ninja" ]; then
    CXX=clang++-19 meson setup "$dir" -Db_sanitize=address,undefined "-Dcpp_args=-fno-sanitize-recover=all -gline-tables-only" \
      -Dfuzz=true -Dtests=false -Dexamples=false -Dcuda=disabled
  fi
  ninja -C "$dir" "${targets[@]/#/tests/fuzz/fuzz_}"
fi
for t in "${targets[@]}"; do
  [ -x "$dir/tests/fuzz/fuzz_$t" ] || { echo "tools/fuzz.sh: no $dir/tests/fuzz/fuzz_$t (configured with -Dfuzz=true?)" >&2; exit 2; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/teeny-fuzz.XXXXXX")
# Stack traces with function names and lines (the sanitizers do not find Debian's symbolizer alone).
symbolizer=$(command -v llvm-symbolizer-19 || command -v llvm-symbolizer || true)
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1${symbolizer:+:external_symbolizer_path=$symbolizer}}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1${symbolizer:+:external_symbolizer_path=$symbolizer}}"
summary=()
for t in "${targets[@]}"; do
  mkdir -p "$work/$t/corpus"
  args=(-max_total_time="$seconds" -print_final_stats=1 -timeout=30 -artifact_prefix="$work/$t/")
  [ -f "tests/fuzz/$t.dict" ] && args+=(-dict="tests/fuzz/$t.dict")
  echo "== fuzz_$t for ${seconds}s (corpus: $work/$t/corpus, then tests/fuzz/corpus/$t)"
  status=0
  seeds=("tests/fuzz/corpus/$t")
  # The importer also starts from ONNX's backend test data (its models and tensors), where installed.
  [ "$t" = onnx ] && [ -d /usr/share/libonnx-testdata/data ] && seeds+=(/usr/share/libonnx-testdata/data)
  "$dir/tests/fuzz/fuzz_$t" "${args[@]}" "$work/$t/corpus" "${seeds[@]}" 2>&1 | tee "$work/$t/log" ||
    status=$?
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/$t/log" | tail -1)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t/log" | tail -1)
  if [ "$status" -ne 0 ]; then
    echo "fuzz_$t: FINDING (exit $status); input(s):" $(ls "$work/$t/" | grep -E '^(crash|leak|oom|timeout|slow-unit)-' |
      sed "s|^|$work/$t/|") "; log: $work/$t/log"
    exit 1
  fi
  summary+=("fuzz_$t: ${runs:-?} runs, ${rate:-?} exec/s, no finding")
done
printf '%s\n' "${summary[@]}"
rm -rf "$work"
