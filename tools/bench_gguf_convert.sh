#!/usr/bin/env bash
# titan convert --to-gguf against llama.cpp's convert_hf_to_gguf.py on the same HF folder, side by
# side in one invocation: wall time and peak RSS (GNU time), alternating the two, 3 runs each, and
# whether the two files are byte for byte the same.
#
#   tools/bench_gguf_convert.sh HF_DIR OUT_DIR [DTYPE ...]     (DTYPE: f32 f16 bf16 q8_0; default q8_0 bf16)
#
#   PYTHON     a Python with torch, transformers, safetensors, numpy (default python3)
#   LLAMA_DIR  a llama.cpp tree with convert_hf_to_gguf.py and gguf-py (default: the one vendored in the
#              llama-cpp-python 0.3.36 sdist, /tmp/lcp/llama_cpp_python-0.3.36/vendor/llama.cpp)
#   TITAN      the titan binary (default build/titan)
# The converter picks tokenizer.ggml.pre by hashing the tokenizer's output: pass a folder whose
# tokenizer it knows (the real Qwen3 tokenizer.json is "qwen2").
set -euo pipefail
hf=$1; out=$2; shift 2
dtypes=("${@:-q8_0}")
[[ $# -eq 0 ]] && dtypes=(q8_0 bf16)
PYTHON=${PYTHON:-python3}
LLAMA_DIR=${LLAMA_DIR:-/tmp/lcp/llama_cpp_python-0.3.36/vendor/llama.cpp}
TITAN=${TITAN:-build/titan}
mkdir -p "$out"
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for d in "${dtypes[@]}"; do
  : > "$out/titan_$d.times"; : > "$out/peer_$d.times"
  for run in 1 2 3; do
    rm -f "$out/titan_$d.gguf" "$out/peer_$d.gguf"
    /usr/bin/time -f "%e %M" -o "$out/t" "$PYTHON" "$LLAMA_DIR/convert_hf_to_gguf.py" "$hf" --outtype "$d" \
      --outfile "$out/peer_$d.gguf" --model-name bench > /dev/null 2>&1
    cat "$out/t" >> "$out/peer_$d.times"
    /usr/bin/time -f "%e %M" -o "$out/t" "$TITAN" convert --from "$hf" --to-gguf "$out/titan_$d.gguf" --dtype "$d" \
      --name bench > /dev/null 2>&1
    cat "$out/t" >> "$out/titan_$d.times"
  done
  same=$(cmp -s "$out/titan_$d.gguf" "$out/peer_$d.gguf" && echo "byte-identical" || echo "DIFFERENT")
  for who in titan peer; do
    s=$(cut -d' ' -f1 "$out/${who}_$d.times" | median); kb=$(cut -d' ' -f2 "$out/${who}_$d.times" | median)
    printf '%-5s %-6s median %6.2f s  peak RSS %6.0f MiB  (runs: %s)\n' "$d" "$who" "$s" "$((kb / 1024))" \
      "$(cut -d' ' -f1 "$out/${who}_$d.times" | paste -sd' ')"
  done
  echo "$d: the two files are $same"
done
