#!/usr/bin/env bash
# The whole test suite: install what is missing, build with warnings as errors, run every test
# (ctest); then rebuild with AddressSanitizer + UndefinedBehaviorSanitizer and run it again. The
# second pass also compiles only the AVX2 baseline kernels and caps oneDNN at AVX2, so the path an
# AVX2-only machine takes is tested too (the first pass tests the AVX-512 path this CPU picks).
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
    -DTITAN_BASELINE_ONLY=ON -DTITAN_WERROR=ON -DTITAN_BUILD_BENCH=OFF > /dev/null
  ninja -C build-sanitize
  (cd build-sanitize && DNNL_MAX_CPU_ISA=AVX2 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --output-on-failure -j "$jobs")
fi
