#!/usr/bin/env bash
# The demo given files it cannot use: each run must end with "error: ..." naming the file and exit
# status 1, never a signal (status > 128) or a silent success.
#   tests/demo/bad_input.sh path/to/fashion-mnist
set -uo pipefail
demo=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

# expect_error WHAT EXPECTED_SUBSTRING ARGS...: runs the demo, checks status 1 and the message.
expect_error() {
  local what=$1 expected=$2
  shift 2
  "$demo" "$@" >"$work/out" 2>"$work/err"
  local status=$?
  if [ "$status" -ne 1 ] || ! grep -qF -- "$expected" "$work/err"; then
    echo "FAIL $what: status $status (want 1), stderr:" >&2
    cat "$work/err" >&2
    echo "  (wanted it to contain: $expected)" >&2
    failures=$((failures + 1))
  else
    echo "ok   $what: $(head -c 300 "$work/err")"
  fi
}

# Weights files: missing, empty, garbage, a header length larger than the file, a header that is
# not JSON, a tensor whose bytes run past the end of the file.
printf '' >"$work/empty.safetensors"
head -c 100 /dev/urandom >"$work/garbage.safetensors"
printf '\xff\xff\xff\xff\xff\xff\xff\x7f{}' >"$work/huge_header.safetensors"
printf '\x08\x00\x00\x00\x00\x00\x00\x00not json' >"$work/not_json.safetensors"
header='{"fc1.weight":{"dtype":"F32","shape":[512,784],"data_offsets":[0,1605632]}}'
{ printf "$(printf '\\x%02x' ${#header})\x00\x00\x00\x00\x00\x00\x00"; printf '%s' "$header"; head -c 64 /dev/zero; } \
  >"$work/truncated.safetensors"
expect_error "missing weights" "$work/none.safetensors" --weights "$work/none.safetensors"
expect_error "empty weights" "the file is empty" --weights "$work/empty.safetensors"
expect_error "garbage weights" "garbage.safetensors" --weights "$work/garbage.safetensors"
expect_error "header length past the end" "huge_header.safetensors" --weights "$work/huge_header.safetensors"
expect_error "header not JSON" "not_json.safetensors" --weights "$work/not_json.safetensors"
expect_error "tensor past the end" "fc1.weight" --weights "$work/truncated.safetensors"

# Data folders: missing, empty, and IDX files that are garbage, truncated or claim huge sizes.
mkdir -p "$work/empty_dir" "$work/garbage" "$work/huge" "$work/bad_gzip"
for split in train t10k; do
  head -c 64 /dev/urandom >"$work/garbage/$split-images-idx3-ubyte"
  head -c 64 /dev/urandom >"$work/garbage/$split-labels-idx1-ubyte"
  # 2^31 - 1 images of 28 x 28 claimed by a 16-byte header.
  printf '\x00\x00\x08\x03\x7f\xff\xff\xff\x00\x00\x00\x1c\x00\x00\x00\x1c' >"$work/huge/$split-images-idx3-ubyte"
  printf '\x00\x00\x08\x01\x7f\xff\xff\xff' >"$work/huge/$split-labels-idx1-ubyte"
done
printf 'not gzip at all' >"$work/bad_gzip/t10k-images-idx3-ubyte.gz"
printf 'not gzip either' >"$work/bad_gzip/t10k-labels-idx1-ubyte.gz"
expect_error "missing data folder" "$work/no_such_dir" --data "$work/no_such_dir"
expect_error "empty data folder" "$work/empty_dir" --data "$work/empty_dir"
expect_error "garbage IDX" "$work/garbage" --data "$work/garbage"
expect_error "not gzip" "t10k-images-idx3-ubyte.gz" --data "$work/bad_gzip"
expect_error "IDX claiming 2^31 images" "huge" --data "$work/huge"

# Bad arguments get the usage and status 2 from the argument parser: not tested here.
[ "$failures" -eq 0 ] || { echo "$failures demo run(s) did not end with a clear error" >&2; exit 1; }
