#!/usr/bin/env bash
# teeny vs ONNX Runtime vs PyTorch on the CPU: MLP 784-512-512-10, LeNet and ResNet-18, per forward.
#
#   bench/run.sh                      # build, install, export, measure, print the table
#   ROUNDS=7 BENCH_SECONDS=3 bench/run.sh
#   CONFIGS="mlp:1 resnet18:1" THREADS="1" bench/run.sh
#
# 1. builds bench-models in build-bench/ (CXX=clang++-19, --buildtype=release);
# 2. installs onnxruntime-node@1.30.0 into build-bench/node_modules (npm --ignore-scripts: the
#    package ships its CPU binaries prebuilt; its install script only fetches CUDA ones) if missing;
# 3. exports the models to ONNX into build-bench/onnx/ with Debian's PyTorch (/usr/bin/python3);
# 4. for ROUNDS rounds, for every (model, batch) in CONFIGS and every thread count in THREADS, runs
#    teeny (bench/model_bench.cpp), ONNX Runtime (bench/ort_bench.mjs) and PyTorch
#    (tools/bench_peers.py time) back to back, the order rotated each round, each timing
#    BENCH_SECONDS seconds of forwards after a warm-up and reporting its median;
# 5. prints the medians over rounds and the ratios teeny/ORT and teeny/PyTorch
#    (tools/bench_peers.py table). Raw results: build-bench/results-<time>.jsonl.
# The machine should be idle (load average below ~0.5): the script prints `uptime` before and after.
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-bench}
ROUNDS=${ROUNDS:-5}
BENCH_SECONDS=${BENCH_SECONDS:-2}
CONFIGS=${CONFIGS:-"mlp:1 mlp:64 lenet:1 lenet:64 resnet18:1"}
THREADS=${THREADS:-"1 2"}
PY=/usr/bin/python3  # Debian's PyTorch 1.13, not a pyenv python
source bench/peers.sh

# 0. what the benchmarks need: Google Benchmark, Debian's PyTorch (the peer, and the ONNX exporter),
#    and OpenBLAS (bench-gemm's reference, and the BLAS Debian's PyTorch must run on to be a fair
#    peer)
tools/setup.sh libbenchmark-dev python3-torch libopenblas-dev libopenblas0-pthread >&2

# 1. teeny's benchmark
bench_build bench/bench-models
if [ ! -x "$BUILD/bench/bench-models" ]; then
  echo "bench-models was not built: is Google Benchmark (libbenchmark-dev) installed?" >&2
  exit 1
fi

# 2. ONNX Runtime for Node.js
bench_ort

# 3. the ONNX models
ONNX=$BUILD/onnx
if [ ! -f "$ONNX/resnet18_b1.onnx" ] || [ tools/bench_peers.py -nt "$ONNX/resnet18_b1.onnx" ] ||
   [ tools/make_fixtures.py -nt "$ONNX/resnet18_b1.onnx" ]; then
  log "exporting the models to $ONNX"
  "$PY" tools/bench_peers.py export "$ONNX" 2> >(grep -v -i warn >&2)
fi

# 4. interleaved runs
results_start results

run_teeny() {  # model batch threads
  local out
  out=$(mktemp)
  "$BUILD/bench/bench-models" --benchmark_filter="^teeny/$1/batch:$2/threads:$3/" \
    --benchmark_min_time="$BENCH_SECONDS" --benchmark_format=json --benchmark_out="$out" \
    --benchmark_out_format=json > /dev/null 2>&1 || true
  "$PY" tools/bench_peers.py teeny-json "$out"
  rm -f "$out"
}
run_ort() {
  node bench/ort_bench.mjs --onnx "$ONNX" --model "$1" --batch "$2" --threads "$3" --seconds "$BENCH_SECONDS"
}
run_pytorch() {
  "$PY" tools/bench_peers.py time --model "$1" --batch "$2" --threads "$3" --seconds "$BENCH_SECONDS" 2> /dev/null
}

runtimes=(teeny ort pytorch)
for round in $(seq 1 "$ROUNDS"); do
  log "round $round/$ROUNDS ($(uptime | sed 's/.*load/load/'))"
  # the floor: one call through each peer's API on a Linear(16, 16)
  run_ort tiny 1 1 >> "$RESULTS"
  run_pytorch tiny 1 1 >> "$RESULTS"
  for config in $CONFIGS; do
    model=${config%%:*}
    batch=${config##*:}
    [ "$model" = tiny ] && continue  # the peers' call floor: measured above, every round
    for threads in $THREADS; do
      for i in 0 1 2; do
        rt=${runtimes[$(((round + i) % 3))]}
        line=$("run_$rt" "$model" "$batch" "$threads" || true)
        if [ -z "$line" ]; then
          line="{\"runtime\": \"$rt\", \"model\": \"$model\", \"batch\": $batch, \"threads\": $threads, \"error\": \"no result\"}"
        fi
        echo "$line" >> "$RESULTS"
        log "  $(tail -n 1 "$RESULTS")"
      done
    done
  done
done
results_finish table
