# Sourced by bench/run.sh, bench/onnx_vs_ort.sh and bench/train.sh: the release build, ONNX Runtime
# for Node.js, and the results file with its table. Expects BUILD (a build dir) and PY (Debian's
# python3); bench_ort sets ORT_NODE_MODULE, results_start RESULTS (it reads ROUNDS and
# BENCH_SECONDS).
ORT_VERSION=1.30.0

log() { echo "== $*" >&2; }

# bench_build TARGET...: configures BUILD (release, benchmarks on) if it is not, builds TARGETs,
# and makes BUILD an absolute path.
bench_build() {
  if ! grep -q "subdir('bench')" meson.build; then
    echo "meson.build does not build bench/ (no subdir('bench')): add it to the root meson.build" >&2
    exit 1
  fi
  if [ ! -f "$BUILD/build.ninja" ]; then
    log "meson setup $BUILD (release)"
    CXX=${CXX:-clang++-19} meson setup "$BUILD" --buildtype=release -Dtests=false -Dbench=true >&2
  fi
  log "ninja -C $BUILD $*"
  ninja -C "$BUILD" "$@" >&2
  BUILD=$(cd "$BUILD" && pwd)
}

# bench_ort: installs onnxruntime-node into BUILD/node_modules if missing (npm --ignore-scripts: the
# package ships its CPU binaries prebuilt; its install script only fetches CUDA ones) and checks
# that it loads.
bench_ort() {
  export ORT_NODE_MODULE=$BUILD/node_modules/onnxruntime-node
  if [ ! -f "$ORT_NODE_MODULE/package.json" ]; then
    log "npm install --ignore-scripts onnxruntime-node@$ORT_VERSION into $BUILD/node_modules"
    [ -f "$BUILD/package.json" ] || echo '{"name": "teeny-bench-peers", "private": true}' > "$BUILD/package.json"
    (cd "$BUILD" && npm install --ignore-scripts --no-audit --no-fund "onnxruntime-node@$ORT_VERSION" >&2)
  fi
  node -e "require('$ORT_NODE_MODULE')" || {
    echo "onnxruntime-node does not load (see above); its binding is $ORT_NODE_MODULE/bin/napi-v*/linux/x64" >&2
    exit 1
  }
}

# results_start PREFIX: RESULTS=BUILD/PREFIX-<time>.jsonl, headed by the commit, the machine and
# its load before the runs.
results_start() {
  RESULTS=$BUILD/$1-$(date +%Y%m%d-%H%M%S).jsonl
  log "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs; $(uptime)"
  {
    echo "# $(date -Is) commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(uname -m) $(nproc) CPUs," \
      "rounds $ROUNDS, $BENCH_SECONDS s per run"
    echo "# before: $(uptime)"
  } > "$RESULTS"
}

# results_finish TABLE: the load after the runs, then `tools/bench_peers.py TABLE`'s table of them.
results_finish() {
  echo "# after: $(uptime)" >> "$RESULTS"
  echo
  echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs; $ROUNDS rounds, $BENCH_SECONDS s per run"
  grep '^# before\|^# after' "$RESULTS" | sed 's/^# /load /'
  "$PY" tools/bench_peers.py "$1" "$RESULTS"
  echo "raw results: $RESULTS"
}
