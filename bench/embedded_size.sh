#!/usr/bin/env bash
# What a typed MLP (batch 1, weights compiled in) adds to a program in the embedded build: the
# sections of bench/size/mlp.cpp minus those of bench/size/empty.cpp, both built the same way
# (-Dembedded=true -Dcpp_eh=none -Dcpp_rtti=false, -Dcpu_isa, unused sections dropped at link).
#
#   bench/embedded_size.sh [avx2|avx512|portable]     (default: avx2)
#
# Needs teeny-embed-weights: from build-test/tools (tools/test.sh builds it) or on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
isa=${1:-avx2}
dir=build-test_embedded-true_cpp-eh-none_cpp-rtti-false_cpu-isa-$isa
export PATH="$PWD/build-test/tools:$PATH"
if ! command -v teeny-embed-weights > /dev/null; then
  echo "no teeny-embed-weights: run tools/test.sh first (it builds build-test/tools/teeny-embed-weights)" >&2
  exit 1
fi
if [ ! -f "$dir/build.ninja" ]; then
  CXX=clang++-19 meson setup "$dir" -Dembedded=true -Dcpp_eh=none -Dcpp_rtti=false -Dcpu_isa="$isa" > /dev/null
fi
ninja -C "$dir" bench/size/teeny-size-empty bench/size/teeny-size-mlp > /dev/null

# Bytes per section kind, from `size -A`: code (.text and friends), read-only data, data, bss.
sections() {
  size -A "$1" | awk '
    $1 ~ /^\.(text|init|fini|plt)/           { text += $2 }
    $1 ~ /^\.(rodata|eh_frame)/              { rodata += $2 }
    $1 ~ /^\.(data|init_array|fini_array)/   { data += $2 }
    $1 ~ /^\.(bss|tbss)/                     { bss += $2 }
    END { printf "%d %d %d %d\n", text, rodata, data, bss }'
}
read -r t0 r0 d0 b0 <<< "$(sections "$dir/bench/size/teeny-size-empty")"
read -r t1 r1 d1 b1 <<< "$(sections "$dir/bench/size/teeny-size-mlp")"
weights=$(python3 -c "
import json, struct, sys
raw = open('examples/fashion_mnist/weights/mlp.safetensors', 'rb').read(8)
n = struct.unpack('<Q', raw)[0]
h = json.loads(open('examples/fashion_mnist/weights/mlp.safetensors', 'rb').read(8 + n)[8:])
print(sum(v['data_offsets'][1] - v['data_offsets'][0] for k, v in h.items() if k != '__metadata__'))")
echo "typed MLP (batch 1) in the embedded build, cpu_isa=$isa: bytes it adds to an empty program"
printf "  code (.text)                 %9d   (%.1f KiB)\n" $((t1 - t0)) "$(echo "($t1 - $t0) / 1024" | bc -l)"
printf "  read-only data               %9d   (weights %d, the rest %d)\n" $((r1 - r0)) "$weights" $((r1 - r0 - weights))
printf "  data                         %9d\n" $((d1 - d0))
printf "  bss (model object: arena, kernels' memory, pointers)  %d\n" $((b1 - b0))
