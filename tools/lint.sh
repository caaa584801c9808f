#!/usr/bin/env bash
# Checks formatting (clang-format-19, .clang-format) of every C++ source, and runs clang-tidy-19
# (.clang-tidy) over the plain C++ translation units of a configured build (module units are
# custom targets and absent from compile_commands.json; they are covered by -Wall -Wextra).
#   tools/lint.sh [build-dir]        (default: build-test)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-test}
files=$(git ls-files '*.cppm' '*.cpp' '*.hpp' '*.cu' '*.cuh' ':!tests/fixtures')
status=0
clang-format-19 --dry-run --Werror $files || status=1
if [ -f "$dir/compile_commands.json" ]; then
  # The plain translation units this build compiled (bench/ only in -Dbench=true builds).
  units=$(for f in $(git ls-files 'modules/cpu/kernels/*.cpp' 'tests/cpu/test_gemm.cpp' 'tests/cpu/test_thread_pool.cpp' \
                       'bench/gemm_bench.cpp'); do
            grep -q "/$f\"" "$dir/compile_commands.json" && echo "$f"
          done || true)
  [ -z "$units" ] || clang-tidy-19 -p "$dir" --quiet $units || status=1
fi
exit $status
