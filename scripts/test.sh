#!/usr/bin/env bash
# The whole test suite: install what is missing, build with warnings as errors, run every test
# (ctest); then rebuild with AddressSanitizer + UndefinedBehaviorSanitizer and run it again.
# SANITIZE=0 skips the second pass (for a quick local loop).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc)

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTITAN_WERROR=ON > /dev/null
ninja -C build
(cd build && ctest --output-on-failure -j "$jobs")

if [[ "${SANITIZE:-1}" != 0 ]]; then
  cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTITAN_SANITIZE=ON \
    -DTITAN_WERROR=ON -DTITAN_BUILD_BENCH=OFF > /dev/null
  ninja -C build-sanitize
  (cd build-sanitize && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --output-on-failure -j "$jobs")
fi
