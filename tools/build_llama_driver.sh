#!/usr/bin/env bash
# Builds tools/llama_driver.cpp (a reference tool for tools/make_gguf_fixtures.py; not part of titan)
# against a shared-library build of llama.cpp.
#
#   LLAMA_DIR    llama.cpp source tree (include/llama.h, ggml/include/)
#                default: /tmp/lcp/llama_cpp_python-0.3.36/vendor/llama.cpp (the tree vendored in the
#                llama-cpp-python 0.3.36 sdist, llama.cpp commit 0c1e570)
#   LLAMA_BUILD  its CMake build folder with bin/libllama.so (BUILD_SHARED_LIBS=ON), default /tmp/llama_build
#                e.g. cmake -S $LLAMA_DIR -B $LLAMA_BUILD -G Ninja -DBUILD_SHARED_LIBS=ON -DCMAKE_BUILD_TYPE=Release \
#                       -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF && ninja -C $LLAMA_BUILD llama
#   OUT          the executable, default $LLAMA_BUILD/bin/llama_driver (rpath set to $LLAMA_BUILD/bin)
#
# Usage: tools/build_llama_driver.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
LLAMA_DIR="${LLAMA_DIR:-/tmp/lcp/llama_cpp_python-0.3.36/vendor/llama.cpp}"
LLAMA_BUILD="${LLAMA_BUILD:-/tmp/llama_build}"
OUT="${OUT:-$LLAMA_BUILD/bin/llama_driver}"
libdir="$LLAMA_BUILD/bin"
[ -f "$LLAMA_DIR/include/llama.h" ] || { echo "no $LLAMA_DIR/include/llama.h (set LLAMA_DIR)" >&2; exit 1; }
[ -e "$libdir/libllama.so" ] || { echo "no $libdir/libllama.so (set LLAMA_BUILD)" >&2; exit 1; }
"${CXX:-g++}" -std=c++17 -O2 -Wall -Wextra \
  -I"$LLAMA_DIR/include" -I"$LLAMA_DIR/ggml/include" \
  "$here/llama_driver.cpp" -o "$OUT" \
  -L"$libdir" -lllama -lggml -lggml-base -Wl,-rpath,"$libdir"
echo "$OUT"
