#!/usr/bin/env bash
# Sets up, builds (with training support) and runs the main demo (examples/fashion_mnist). Without
# arguments it trains the MLP for one epoch, saves it to build/mlp-trained.safetensors (with the
# learning curve beside it), reloads it and classifies the test images; arguments go to the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
[ -f build/build.ninja ] || CXX=clang++-19 meson setup build --buildtype=release -Dtraining=true
meson configure build -Dtraining=true >/dev/null   # an older build dir may lack it
ninja -C build examples/fashion-mnist
if (($# == 0)); then
  set -- --model mlp --train 1 --save build/mlp-trained.safetensors
fi
build/examples/fashion-mnist "$@"
