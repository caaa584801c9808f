#!/usr/bin/env bash
# teeny-run on the ONNX fixtures (tools/make_onnx_fixtures.py: expected outputs from NumPy, and
# from PyTorch for its export): answers that match exit 0, a wrong expected file exits 2 naming
# the worst element, bad input exits 1 with a message, never a signal.
#   tests/tools/run.sh path/to/teeny-run path/to/tests/fixtures/onnx
set -uo pipefail
run=$1 fixtures=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

# expect STATUS WHAT EXPECTED_SUBSTRING ARGS...: runs teeny-run, checks the status and that its
# stdout + stderr contain the substring.
expect() {
  local want=$1 what=$2 text=$3
  shift 3
  "$run" "$@" >"$work/out" 2>&1
  local status=$?
  if [ "$status" -ne "$want" ] || ! grep -qF -- "$text" "$work/out"; then
    echo "FAIL $what: status $status (want $want), output:" >&2
    cat "$work/out" >&2
    echo "  (wanted it to contain: $text)" >&2
    failures=$((failures + 1))
  else
    echo "ok   $what: $(grep -F -- "$text" "$work/out" | head -n 1 | cut -c1-200)"
  fi
}

m=$fixtures/mlp.onnx
expect 0 "describes the model" "input  x: f32 [batch, 4]" "$m" --summary --dims batch=8
# Gemm and MatMul become linear ops; 4x6 + 6 + 6x3 = 48 parameters (f32: 192 bytes).
expect 0 "counts its ops" "ops: linear 2, relu 1, softmax 1" "$m" --summary
expect 0 "sizes its plan" "parameters 192 B (48 values)" "$m" --summary --dims batch=8
expect 0 "matches NumPy from .npy files" "expect y: ok" "$m" --input x="$fixtures/mlp_x_8.npy" --expect y="$fixtures/mlp_y_8.npy"
expect 0 "matches NumPy from .pb files" "expect y: ok" "$m" --input x="$fixtures/mlp_x_1.pb" --expect y="$fixtures/mlp_y_1.pb"
expect 0 "reads batch from the input file" "output y: f32 [8, 3]" "$m" --input x="$fixtures/mlp_x_8.npy"
expect 2 "reports the worst element" "worst at [5, 2]" "$m" --input x="$fixtures/mlp_x_8.npy" --expect y="$fixtures/mlp_y_8_off.npy"
expect 0 "takes a looser tolerance" "expect y: ok" "$m" --input x="$fixtures/mlp_x_8.npy" --expect y="$fixtures/mlp_y_8_off.npy" --atol 0.02
expect 2 "reports a shape mismatch" "MISMATCH" "$m" --input x="$fixtures/mlp_x_8.npy" --expect y="$fixtures/mlp_y_1.pb"
expect 0 "runs on random inputs" "dim batch: 1 (not given" "$m"
expect 0 "saves outputs" "saved $work/out-dir/y.npy" "$m" --input x="$fixtures/mlp_x_8.npy" --save-outputs "$work/out-dir"
expect 0 "saved outputs are the answers" "expect y: ok" "$m" --input x="$fixtures/mlp_x_8.npy" --expect y="$work/out-dir/y.npy" --rtol 0 --atol 0
expect 0 "benchmarks" "bench: 20 runs (after 2 warm-up), 2 thread(s) on cpu: latency p50" "$m" --dims batch=4 --bench 20 --warmup 2 --threads 2
# PyTorch's shape computations on a dynamic batch (x.size(0), view(n, -1), expand to a computed
# shape, x[:, 0]): one file at batch 2 and 5, as PyTorch computed them.
for opset in 13 17; do
  for batch in 2 5; do
    expect 0 "PyTorch's dynamic shapes, opset $opset, batch $batch" "expect y: ok" "$fixtures/tokens_$opset.onnx" \
      --input x="$fixtures/tokens_x_$batch.npy" --expect y="$fixtures/tokens_y_$batch.npy"
  done
done
# ConvTranspose where ONNX's test data does not reach (by phases with groups, by stuffing at a
# stride over the window, 1-d at a stride), as PyTorch computed it: status 0 needs all three to match.
ct=$fixtures/conv_transpose
# y and w by phases (4 and 2 convolutions, interleaved by concats), z by stuffing (one convolution)
expect 0 "ConvTranspose by phases and by stuffing" "ops: add 2, concat 4, conv2d 7, pad 6, reshape 12" "$ct.onnx" \
  --summary
expect 0 "ConvTranspose as PyTorch" "expect w: ok" "$ct.onnx" --input x="${ct}_x.npy" --input s="${ct}_s.npy" \
  --expect y="${ct}_y.npy" --expect z="${ct}_z.npy" --expect w="${ct}_w.npy"
# Resize as PyTorch exports F.interpolate (bilinear by a scale, bilinear with align_corners to a
# size, nearest by 2), as PyTorch computed it.
r=$fixtures/resize
expect 0 "linear Resize as Linear ops" "ops: linear 4, transpose 4, upsample 1" "$r.onnx" --summary
expect 0 "Resize as PyTorch" "expect w: ok" "$r.onnx" --input x="${r}_x.npy" --expect y="${r}_y.npy" \
  --expect z="${r}_z.npy" --expect w="${r}_w.npy"
# x * sigmoid(x) (PyTorch's F.silu) imports as one SiLU, fused into the convolution before it; a
# sigmoid read twice stays a sigmoid and a mul. As PyTorch computed them.
f=$fixtures/silu
expect 0 "x * sigmoid(x) fused to SiLU" "ops: conv2d 1, mul 1, sigmoid 1, silu 1" "$f.onnx" --summary
expect 0 "SiLU as PyTorch" "expect s: ok" "$f.onnx" --input x="${f}_x.npy" --expect y="${f}_y.npy" \
  --expect z="${f}_z.npy" --expect s="${f}_s.npy"
# A ViT's class token expanded to the symbolic batch, and constant operands of a comparison and a
# Where: Weight nodes. As PyTorch computed them, at batch 2 and 3 of one file.
c=$fixtures/class_token
expect 0 "weights used as values" "ops: add 1, concat 1, conv2d 1, gt 1, permute 1, reshape 1, weight 3, where 1" \
  "$c.onnx" --summary
for batch in 2 3; do
  expect 0 "class token expanded to batch $batch" "expect y: ok" "$c.onnx" --input x="${c}_x_$batch.npy" \
    --expect y="${c}_y_$batch.npy"
done
expect 1 "a missing model" "no-such.onnx" "$fixtures/no-such.onnx"
expect 1 "an unknown input" "the model has no input 'z' (its inputs: x)" "$m" --input z="$fixtures/mlp_x_8.npy"
expect 1 "an unknown output" "the model has no output 'q'" "$m" --expect q="$fixtures/mlp_y_8.npy"
expect 1 "an unknown dim" "the model has no dim 'seq' (its dims: batch)" "$m" --dims seq=3
expect 1 "an input of the wrong dtype" "the model takes f32" "$m" --input x="$fixtures/../io/npy/f64_fortran_2x3.npy"
expect 1 "an input of the wrong shape" "expected shape [batch, 4], got [2, 3]" "$m" --input x="$fixtures/../io/npy/f32_2x3.npy"
expect 1 "dims that disagree with the input" "symbolic dim 'batch'" "$m" --dims batch=2 --input x="$fixtures/mlp_x_8.npy"
expect 1 "a missing input file" "cannot open '$m.npy'" "$m" --input x="$m.npy"
printf 'garbage' >"$work/bad.npy"
expect 1 "a malformed input file" "not a .npy file" "$m" --input x="$work/bad.npy"
expect 1 "a tensor file of another kind" "a NumPy .npy or an ONNX TensorProto .pb" "$m" --input x="$m"
expect 1 "an unknown option" "unknown option --fast" "$m" --fast 1
expect 1 "a bad value" "bad value 'many' for --threads" "$m" --threads many
expect 1 "no model" "no model file given" --summary
printf 'garbage' >"$work/bad.onnx"
expect 1 "a file that is not ONNX" "bad.onnx" "$work/bad.onnx"

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed" >&2; exit 1; }
