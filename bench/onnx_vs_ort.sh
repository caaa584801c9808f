#!/usr/bin/env bash
# teeny and ONNX Runtime reading the same .onnx files: torchvision's models as
# tools/make_onnx_models.py exports them (random weights, opset 13, a dynamic batch dim), per
# forward at each batch, and the time from file to a model ready to run.
#
#   bench/onnx_vs_ort.sh                      # ROUNDS=3 BENCH_SECONDS=2 THREADS=1 by default
#   MODELS="resnet18" BATCHES="1" ROUNDS=5 bench/onnx_vs_ort.sh
#
# For each round, model, batch and thread count it runs, back to back, the order rotated each round:
#   - teeny-run FILE --dims batch=B --threads T --bench N (its import, load, and N forwards timed;
#     N sized to BENCH_SECONDS by a short first run);
#   - bench/ort_bench.mjs --file FILE (session creation, then BENCH_SECONDS of session.run());
#   - for resnet18, bench-models' teeny/resnet18 (the same network built with the GraphBuilder):
#     the importer's graph against the hand-built one.
# Then prints the medians over rounds and the ratios (tools/bench_peers.py onnx-table). Raw
# results: BUILD/onnx-results-<time>.jsonl. The machine should be idle.
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-bench}
ROUNDS=${ROUNDS:-3}
BENCH_SECONDS=${BENCH_SECONDS:-2}
MODELS=${MODELS:-"resnet18 mobilenet_v2 efficientnet_b0"}
BATCHES=${BATCHES:-"1 8"}
THREADS=${THREADS:-1}
OPSET=${OPSET:-13}
PY=/usr/bin/python3  # Debian's PyTorch 1.13, the exporter
source bench/peers.sh

tools/setup.sh libbenchmark-dev python3-torch python3-torchvision libonnx-dev libprotobuf-dev >&2
bench_build tools/teeny-run bench/bench-models
[ -x "$BUILD/tools/teeny-run" ] || { echo "teeny-run was not built: is libonnx-dev installed?" >&2; exit 1; }
bench_ort

MODEL_DIR=$BUILD/onnx-models
mkdir -p "$MODEL_DIR"
for m in $MODELS; do
  if [ ! -f "$MODEL_DIR/${m}_$OPSET.onnx" ] || [ tools/make_onnx_models.py -nt "$MODEL_DIR/${m}_$OPSET.onnx" ]; then
    log "exporting $m to $MODEL_DIR"
    "$PY" tools/make_onnx_models.py "$MODEL_DIR" "$m" 2> >(grep -v -i warn >&2) >&2
  fi
done

results_start onnx-results

run_teeny_onnx() {  # model batch threads
  local file=$MODEL_DIR/${1}_$OPSET.onnx out runs
  out=$(mktemp)
  # a short first run sizes N to BENCH_SECONDS
  "$BUILD/tools/teeny-run" "$file" --dims batch="$2" --threads "$3" --bench 3 --warmup 1 > "$out" 2>&1 || true
  runs=$("$PY" -c "
import json, sys
r = json.loads(sys.argv[1])
print(max(10, int($BENCH_SECONDS * 1e6 / r['p50_us'])) if 'p50_us' in r else 3)" \
    "$("$PY" tools/bench_peers.py teeny-run-json "$out" "$1" "$2" "$3")")
  "$BUILD/tools/teeny-run" "$file" --dims batch="$2" --threads "$3" --bench "$runs" --warmup 3 > "$out" 2>&1 || true
  "$PY" tools/bench_peers.py teeny-run-json "$out" "$1" "$2" "$3"
  rm -f "$out"
}
run_ort() {
  node bench/ort_bench.mjs --file "$MODEL_DIR/${1}_$OPSET.onnx" --name "$1" --shape "$2,3,224,224" --threads "$3" \
    --seconds "$BENCH_SECONDS"
}
run_teeny_by_hand() {
  [ "$1" = resnet18 ] || return 0
  local out
  out=$(mktemp)
  "$BUILD/bench/bench-models" --benchmark_filter="^teeny/$1/batch:$2/threads:$3/" \
    --benchmark_min_time="$BENCH_SECONDS" --benchmark_format=json --benchmark_out="$out" \
    --benchmark_out_format=json > /dev/null 2>&1 || true
  "$PY" tools/bench_peers.py teeny-json "$out"
  rm -f "$out"
}

runners=(teeny_onnx ort teeny_by_hand)
for round in $(seq 1 "$ROUNDS"); do
  log "round $round/$ROUNDS ($(uptime | sed 's/.*load/load/'))"
  for m in $MODELS; do
    for b in $BATCHES; do
      for t in $THREADS; do
        for i in 0 1 2; do
          line=$("run_${runners[$(((round + i) % 3))]}" "$m" "$b" "$t" || true)
          [ -n "$line" ] || continue
          echo "$line" >> "$RESULTS"
          log "  $line"
        done
      done
    done
  done
done
results_finish onnx-table
