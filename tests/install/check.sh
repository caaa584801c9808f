#!/usr/bin/env bash
# Builds and runs a program against an installed teeny the way docs/using-teeny.md tells a project
# that does not use Meson: compile the installed module interfaces with your own compiler, each
# after the units it imports, then the program, with pkg-config's flags.
#   meson install -C build-test --destdir /tmp/stage && tests/install/check.sh /tmp/stage/usr/local
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefix=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pc_file=$(find "$prefix" -name teeny.pc -print -quit)
[ -n "$pc_file" ] || { echo "no teeny.pc under $prefix" >&2; exit 1; }
export PKG_CONFIG_PATH="$(dirname "$pc_file")"
pc() { pkg-config --define-variable=prefix="$prefix" "$@" teeny; }

read -r -a cflags <<< "$(pc --cflags)"
module_dir=$(pc --variable=module_dir)
# Each unit starts once the units it imports are built, so independent ones build in parallel.
declare -A job
maps=()
while read -r name source imports; do
  [ -n "$name" ] || continue
  for dep in $imports; do wait "${job[$dep]}" 2>/dev/null || true; done
  bmi="$work/${name//:/-}.pcm"
  (clang++-19 "${cflags[@]}" "${maps[@]}" -x c++-module --precompile "$module_dir/$source" -o "$bmi" &&
     touch "$bmi.ok") &
  job[$name]=$!
  maps+=("-fmodule-file=$name=$bmi")
done < "$(pc --variable=module_units)"
wait
for map in "${maps[@]}"; do
  bmi=${map#*=*=}
  [ -e "$bmi.ok" ] || { echo "building the interface ${map#-fmodule-file=} failed" >&2; exit 1; }
done
read -r -a libs <<< "$(pc --static --libs)"   # static libraries: their dependencies too
clang++-19 "${cflags[@]}" "${maps[@]}" "$here/main.cpp" "${libs[@]}" -o "$work/main"
"$work/main"
