#!/usr/bin/env python3
"""The peer of bench/data_bench: pyarrow reading the same Parquet files into Python rows, as a
PyTorch data pipeline (datasets' Parquet reader, a torch IterableDataset) gets them.

  python3 tools/bench_parquet_peer.py --make DIR [--mb 100]   writes DIR/text.parquet (the
      tinyshakespeare paragraphs repeated to ~MB megabytes of text, pyarrow defaults: snappy,
      dictionary, 1 MiB pages, row groups of 122,880 rows... as pq.write_table makes them) and
      DIR/chat.parquet (the same paragraphs as two-message conversations), and their JSONL twins
  python3 tools/bench_parquet_peer.py --read FILE --column text [--repeats 3]
      prints RESULT {"seconds": median, "rows": N, "bytes": text bytes}: one pass of
      ParquetFile.iter_batches(columns=[column]) + to_pylist(), the strings touched once.
"""
import argparse
import json
import os
import statistics
import time

import pyarrow as pa
import pyarrow.parquet as pq

SHAKESPEARE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../shared/assets/text/tinyshakespeare.txt")


def make(out, mb):
    paragraphs = [p for p in open(SHAKESPEARE, encoding="utf-8").read().split("\n\n") if p.strip()]
    rows, size, i = [], 0, 0
    while size < mb * 1e6:
        p = paragraphs[i % len(paragraphs)] + f" ({i})"
        rows.append(p)
        size += len(p.encode())
        i += 1
    os.makedirs(out, exist_ok=True)
    pq.write_table(pa.table({"text": rows}), os.path.join(out, "text.parquet"))
    msgs = [[{"role": "user", "content": f"Recite passage {k}."}, {"role": "assistant", "content": p}]
            for k, p in enumerate(rows)]
    pq.write_table(pa.table({"messages": msgs}), os.path.join(out, "chat.parquet"))
    with open(os.path.join(out, "text.jsonl"), "w", encoding="utf-8") as f:
        for p in rows:
            f.write(json.dumps({"text": p}, ensure_ascii=False) + "\n")
    print(json.dumps({"rows": len(rows), "text_bytes": size}))


def read(path, column, repeats):
    times, rows, nbytes = [], 0, 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        rows = nbytes = 0
        for batch in pq.ParquetFile(path).iter_batches(columns=[column]):
            for r in batch.to_pylist():
                v = r[column]
                nbytes += len(v) if isinstance(v, str) else sum(len(m["content"]) for m in v)
                rows += 1
        times.append(time.perf_counter() - t0)
    print("RESULT " + json.dumps({"seconds": statistics.median(times), "rows": rows, "bytes": nbytes}))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--make")
    ap.add_argument("--mb", type=float, default=100)
    ap.add_argument("--read")
    ap.add_argument("--column", default="text")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    if a.make:
        make(a.make, a.mb)
    else:
        read(a.read, a.column, a.repeats)
