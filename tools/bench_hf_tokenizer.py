#!/usr/bin/env python3
"""Peer for bench/tokenizer_bench.cpp: Hugging Face `tokenizers` (Rust) encode throughput.

Loads a tokenizer.json with tokenizers.Tokenizer.from_file, reads and concatenates the text files
(bytes, in the order given), splits them into documents exactly as tokenizer_bench does, and times
  --threads 1: `encode(doc, add_special_tokens=False)` in a loop over the documents, with
               TOKENIZERS_PARALLELISM=false and RAYON_NUM_THREADS=1;
  --threads N: `encode_batch(docs, add_special_tokens=False)` over all documents, with
               RAYON_NUM_THREADS=N.
The thread count is read by the Rust side when the module is first used, so the environment is set
before `import tokenizers`; one process measures one mode (tokenizer_bench runs it once per mode).

Documents: from byte offset `start`, take `--chunk` bytes (default 2048), then extend to just past
the next '\\n' (or the end of the text); the next document starts there. Cutting after an ASCII
newline keeps every document valid UTF-8.

Also times the first pass of a freshly loaded tokenizer (empty word cache; median of 3 loads).
Prints MB/s (1e6 bytes of UTF-8 input per second) and tokens/s, then `RESULT {json}`.

  python3 tools/bench_hf_tokenizer.py --tokenizer T.json --text a.txt [--text b.txt ...] \\
      [--threads 1] [--chunk 2048] [--warmup 1] [--repeats 5]
"""
import argparse
import json
import os
import statistics
import sys
import time


def split_documents(data: bytes, chunk: int) -> list:
    docs = []
    start = 0
    while start < len(data):
        end = min(start + chunk, len(data))
        newline = data.find(b"\n", end)
        end = len(data) if newline < 0 else newline + 1
        docs.append(data[start:end].decode("utf-8"))
        start = end
    return docs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--text", action="append", required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--chunk", type=int, default=2048)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    # Before the import: rayon sizes its pool from RAYON_NUM_THREADS on first use.
    os.environ["RAYON_NUM_THREADS"] = str(args.threads)
    os.environ["TOKENIZERS_PARALLELISM"] = "false" if args.threads == 1 else "true"
    import tokenizers  # noqa: E402

    tok = tokenizers.Tokenizer.from_file(args.tokenizer)
    data = b"".join(open(path, "rb").read() for path in args.text)
    docs = split_documents(data, args.chunk)

    if args.threads == 1:
        def run():
            return sum(len(tok.encode(d, add_special_tokens=False).ids) for d in docs)
        mode = "encode loop"
    else:
        def run():
            return sum(len(e.ids) for e in tok.encode_batch(docs, add_special_tokens=False))
        mode = "encode_batch"

    # Cold: the first pass of a freshly loaded tokenizer (its BPE word cache empty), median of 3.
    cold = []
    for _ in range(3):
        fresh = tokenizers.Tokenizer.from_file(args.tokenizer)
        t0 = time.perf_counter()
        if args.threads == 1:
            for d in docs:
                fresh.encode(d, add_special_tokens=False)
        else:
            fresh.encode_batch(docs, add_special_tokens=False)
        cold.append(time.perf_counter() - t0)
    cold_s = statistics.median(cold)

    num_tokens = 0
    for _ in range(args.warmup):
        num_tokens = run()
    times = []
    for _ in range(max(1, args.repeats)):
        t0 = time.perf_counter()
        num_tokens = run()
        times.append(time.perf_counter() - t0)
    median_s = statistics.median(times)
    mb_per_s = len(data) / median_s / 1e6
    tokens_per_s = num_tokens / median_s
    print(f"HF tokenizers {tokenizers.__version__} {mode}, {args.threads} thread(s): {len(docs)} docs, "
          f"{len(data)} bytes, {num_tokens} tokens | median {median_s:.4f} s (min {min(times):.4f}, "
          f"max {max(times):.4f}) | {mb_per_s:.2f} MB/s | {tokens_per_s:.0f} tokens/s | cold first pass "
          f"{len(data) / cold_s / 1e6:.2f} MB/s")
    print("RESULT " + json.dumps({
        "impl": "hf_tokenizers", "tokenizers_version": tokenizers.__version__,
        "python_version": sys.version.split()[0], "mode": mode, "threads": args.threads,
        "num_docs": len(docs), "num_bytes": len(data), "num_tokens": num_tokens,
        "median_s": median_s, "min_s": min(times), "max_s": max(times),
        "mb_per_s": mb_per_s, "tokens_per_s": tokens_per_s,
        "cold_s": cold_s, "cold_mb_per_s": len(data) / cold_s / 1e6}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
