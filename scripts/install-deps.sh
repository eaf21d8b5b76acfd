#!/usr/bin/env bash
# Installs what building and testing need on Debian 12: compilers (clang and its compiler-rt for
# the libFuzzer targets; ccache, so native builds of unchanged code are not compiled again),
# clang-format-14 (the C++ is checked against .clang-format),
# Highway, Catch2, Emscripten, Unicode data, Chromium and Firefox ESR for the browser tests, and
# the npm packages in package-lock.json (the browser drivers among them, which never download a
# browser: the tests drive these two).
# Safe to run again: it skips apt-get when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ clang-14 libclang-rt-14-dev clang-format-14 cmake make ccache libhwy-dev catch2 emscripten chromium
          firefox-esr unicode-data python3)
# Node and npm may come from Debian or from another nodejs package (whose npm is built in).
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: apt-get install ${missing[*]}"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund
fi
