#!/usr/bin/env bash
# Runs the ONNX backend test data through teeny (tests/onnx/conformance.cpp) and rewrites
# docs/onnx-conformance.md. Usage: tools/onnx-conformance.sh [BUILD_DIR]   (default: build-test)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-test}
ninja -C "$dir" tests/teeny-onnx-conformance
"$dir/tests/teeny-onnx-conformance" /usr/share/libonnx-testdata/data --report docs/onnx-conformance.md
