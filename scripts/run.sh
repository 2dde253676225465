#!/usr/bin/env bash
# The main job, the quickstart: install what is missing, build (Release), train a tokenizer on the
# corpus built into the binary (titan's own docs and sources) unless one is there, then train the
# `qwen3_debug` config from scratch on that corpus, printing metric lines. Outputs (config.toml,
# metrics.jsonl, loss.svg) go to outputs/qwen3_debug. Extra arguments are config overrides, e.g.
# `scripts/run.sh --training.steps 100` (see `build/titan train --config qwen3_debug --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
ninja -C build titan
tokenizer=outputs/quickstart_tokenizer
if [[ ! -f $tokenizer/tokenizer.json ]]; then
  ./build/titan train-tokenizer --dataset quickstart --vocab-size 2048 --out "$tokenizer"
fi
exec ./build/titan train --config qwen3_debug --model.hf_assets_path "$tokenizer" "$@"
