#!/usr/bin/env bash
# The main job: install what is missing, build (Release), run the built-in demo — a
# forward+backward of the `debug` spec on random weights and tokens — and print its metrics.
# Extra arguments go to `titan demo` (e.g. --spec 0.6B --layers 4 --batch 1 --seq 2048).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
ninja -C build titan
exec ./build/titan demo "$@"
