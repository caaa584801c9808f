#!/usr/bin/env bash
# The main demo (examples/fashion_mnist): installs what is missing, builds only the demo, and runs
# it. Without arguments it trains the MLP for one epoch, saves it to build-demo/mlp-trained.safetensors
# (with the learning curve beside it), reloads it and classifies the test images; arguments go to
# the demo instead (--help lists them).
#
# The demo runs on the CPU. Its build (build-demo/) is a release build with training, of the
# modules the demo imports only: no CUDA kernels, tests or benchmarks (tools/test.sh builds those,
# in build-test/). A few minutes on two cores the first time; nothing the second.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build-demo
say() { echo "teeny demo: $*"; }

start=$SECONDS
tools/setup.sh
((SECONDS - start > 2)) && say "packages installed in $((SECONDS - start)) s"

start=$SECONDS
if [ ! -f "$dir/build.ninja" ]; then
  say "configuring $dir (release, with training, CPU only)"
  if ! log=$(CXX=clang++-19 meson setup "$dir" --buildtype=release -Dtraining=true -Dcuda=disabled -Dtests=false 2>&1); then
    echo "$log" >&2
    exit 1
  fi
fi

# ninja's "[done/total elapsed] step" lines: on a terminal one line, rewritten in place; otherwise
# (a log) one line per step. Anything else ninja prints (a compiler's error) is shown as it is.
tty=0
[ -t 1 ] && tty=1
NINJA_STATUS="[%f/%t %es] " ninja -C "$dir" examples/fashion-mnist | awk -v tty=$tty '
  /^ninja: (Entering|Leaving) directory/ { next }
  /^ninja: no work to do/ { uptodate = 1; next }
  /bmi_order\.cpp\.o$|static target modules\/libunit-/ { next }   # ordering stubs (modules/meson.build)
  /^\[[0-9]+\/[0-9]+ / {
    line = $0
    # "Generating modules/teeny.cpu-shape.pcm with a custom command" -> "teeny.cpu:shape (interface)"
    if (match(line, /Generating modules\/[^ ]+\.(pcm|o) with a custom command/)) {
      unit = substr(line, RSTART + 19, RLENGTH - 19 - 22)
      kind = unit ~ /\.pcm$/ ? "interface" : "code"
      sub(/\.(pcm|o)$/, "", unit)
      sub(/-/, ":", unit)
      line = substr(line, 1, RSTART - 1) "module " unit " (" kind ")"
    }
    if (tty) printf "\r\033[K%s", substr(line, 1, 100); else print line
    fflush()
    shown = 1
    next
  }
  { if (tty && shown) printf "\n"; shown = 0; print }
  END { if (tty && shown) printf "\n"; if (uptodate) print "teeny demo: build up to date" }'
((SECONDS - start > 2)) && say "built in $((SECONDS - start)) s ($dir)"

if (($# == 0)); then
  set -- --model mlp --train 1 --save "$dir/mlp-trained.safetensors"
fi
exec "$dir/examples/fashion-mnist" "$@"
