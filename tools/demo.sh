#!/usr/bin/env bash
# Sets up, builds and runs the main demo (examples/fashion_mnist). Extra arguments go to the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
[ -f build/build.ninja ] || CXX=clang++-19 meson setup build --buildtype=release
ninja -C build examples/fashion-mnist
build/examples/fashion-mnist "$@"
