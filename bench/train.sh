#!/usr/bin/env bash
# teeny vs PyTorch 1.13 eager on the CPU: one training step (forward, cross-entropy, backward,
# AdamW, zero_grad) of the demo's MLP and LeNet at batch 64.
#
#   bench/train.sh                          # build, measure, print the table
#   ROUNDS=7 BENCH_SECONDS=3 bench/train.sh
#   CONFIGS="lenet:64" THREADS="1" bench/train.sh
#
# 1. builds bench-train in build-bench-train/ (CXX=clang++-19, --buildtype=release, -Dtraining=true);
# 2. for ROUNDS rounds, for every (model, batch) in CONFIGS and every thread count in THREADS, runs
#    teeny (bench/train_bench.cpp) and PyTorch (tools/bench_peers.py train-time) back to back, the
#    order swapped each round, each timing BENCH_SECONDS seconds of steps after a warm-up;
# 3. prints the medians over rounds and the ratio teeny/PyTorch (tools/bench_peers.py train-table).
#    Raw results: build-bench-train/train-results-<time>.jsonl.
# The machine should be idle (load average below ~0.5): the script prints `uptime` before and after.
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-bench-train}
ROUNDS=${ROUNDS:-5}
BENCH_SECONDS=${BENCH_SECONDS:-2}
CONFIGS=${CONFIGS:-"mlp:64 lenet:64"}
THREADS=${THREADS:-"1 2"}
PY=/usr/bin/python3  # Debian's PyTorch 1.13, not a pyenv python
source bench/peers.sh

if [ ! -f "$BUILD/build.ninja" ]; then
  log "meson setup $BUILD (release, training)"
  CXX=${CXX:-clang++-19} meson setup "$BUILD" --buildtype=release -Dtests=false -Dexamples=false -Dbench=true \
    -Dtraining=true >&2
fi
log "ninja -C $BUILD bench/bench-train"
ninja -C "$BUILD" bench/bench-train >&2

results_start train-results

run_teeny() {  # model batch threads
  "$BUILD/bench/bench-train" --model "$1" --batch "$2" --threads "$3" --seconds "$BENCH_SECONDS"
}
run_pytorch() {
  "$PY" tools/bench_peers.py train-time --model "$1" --batch "$2" --threads "$3" --seconds "$BENCH_SECONDS" 2> /dev/null
}

runtimes=(teeny pytorch)
for round in $(seq 1 "$ROUNDS"); do
  log "round $round/$ROUNDS ($(uptime | sed 's/.*load/load/'))"
  for config in $CONFIGS; do
    model=${config%%:*}
    batch=${config##*:}
    for threads in $THREADS; do
      for i in 0 1; do
        rt=${runtimes[$(((round + i) % 2))]}
        line=$("run_$rt" "$model" "$batch" "$threads" || true)
        if [ -z "$line" ]; then
          line="{\"runtime\": \"$rt\", \"mode\": \"train\", \"model\": \"$model\", \"error\": \"no result\"}"
        fi
        echo "$line" >> "$RESULTS"
        log "  $(tail -n 1 "$RESULTS")"
      done
    done
  done
done
results_finish train-table
