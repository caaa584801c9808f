# Sourced by bench/run.sh and bench/onnx_vs_ort.sh: the release build and ONNX Runtime for Node.js
# that both compare against. Expects BUILD (a build dir) and sets ORT_NODE_MODULE.
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
