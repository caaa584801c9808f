#!/usr/bin/env bash
# Real models through the ONNX importer: torchvision's classification models and a decoder-only
# transformer, exported by Debian's PyTorch (tools/make_onnx_models.py: random weights, randomised
# BatchNorm statistics, opsets 13 and 17, a dynamic batch), each run by teeny-run at batch 1 and 4
# from one file and compared with PyTorch's outputs: max |teeny - PyTorch| <= 1e-4 max |PyTorch|.
#   tools/onnx-models.sh [BUILD_DIR] [MODEL ...]     (default: build-test; every model)
# Prints one line per model, opset and batch; exits 1 if any differs or fails to import. The
# exported files are kept in BUILD_DIR/onnx-models/ (about 600 MB) and made again only when
# tools/make_onnx_models.py is newer.
set -uo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-test}
shift || true
tools/setup.sh python3-torch python3-torchvision python3-numpy > /dev/null
run="$dir/tools/teeny-run"
[ -x "$run" ] || { echo "tools/onnx-models.sh: no $run (build it: ninja -C $dir tools/teeny-run)" >&2; exit 1; }
out="$dir/onnx-models"
mkdir -p "$out"
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(resnet18 mobilenet_v2 mobilenet_v3_small squeezenet1_1 shufflenet_v2_x0_5
                                     efficientnet_b0 densenet121 googlenet convnext_tiny regnet_y_400mf vit_small decoder)
stale=()
for m in "${models[@]}"; do
  [ "$out/${m}_y_4.npy" -nt tools/make_onnx_models.py ] || stale+=("$m")
done
if [ ${#stale[@]} -gt 0 ]; then
  /usr/bin/python3 tools/make_onnx_models.py "$out" "${stale[@]}" 2>&1 | grep -v -i "warn" || true
fi

failures=0
for m in "${models[@]}"; do
  for opset in 13 17; do
    for batch in 1 4; do
      y="$out/${m}_y_${batch}.npy"
      atol=$(/usr/bin/python3 -c "import numpy as np; print(1e-4 * float(np.abs(np.load('$y')).max()))")
      if [ "$atol" = "0.0" ]; then  # an all-zero answer would pass whatever teeny computed
        echo "FAIL $m opset $opset batch $batch: PyTorch's output is all zeros, which checks nothing"
        failures=$((failures + 1))
        continue
      fi
      result=$("$run" "$out/${m}_${opset}.onnx" --input x="$out/${m}_x_${batch}.npy" --expect y="$y" \
               --rtol 0 --atol "$atol" 2>&1)
      status=$?
      line=$(echo "$result" | grep -E "^expect y:|^teeny-run:" | head -n 1)
      if [ $status -eq 0 ]; then
        echo "ok   $m opset $opset batch $batch: ${line#expect y: ok }"
      else
        echo "FAIL $m opset $opset batch $batch (exit $status): $line"
        echo "$result" | grep "^  node" | head -n 5
        failures=$((failures + 1))
      fi
    done
  done
done
[ $failures -eq 0 ] || { echo "$failures of $((${#models[@]} * 4)) runs failed" >&2; exit 1; }
