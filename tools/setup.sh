#!/usr/bin/env bash
# Installs what teeny needs on Debian 12, and only what is missing (apt needs root then).
# Usage: tools/setup.sh [PACKAGE...]   (run by tools/demo.sh, tools/test.sh and tools/fuzz.sh;
#        extra packages: e.g. libclang-rt-19-dev, the sanitizer and libFuzzer runtimes)
set -euo pipefail

packages=(meson ninja-build clang-19 doctest-dev librange-v3-dev zlib1g-dev pkg-config dataset-fashion-mnist "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "teeny setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
