#!/usr/bin/env python3
"""Writes the Parquet reader's fixtures: one small dataset written by every writer and setting the
Hub's files come from, and what pyarrow reads back from each file.

  python3 tools/make_parquet_fixtures.py --out tests/fixtures/parquet

The dataset (37 rows): text (Shakespeare lines, non-ASCII text, one empty string), id (int64),
score (double, some null), tags (list<string>: empty lists and nulls), meta (a nullable struct of a
string and an int32), messages (list<struct<role, content>>, the OpenAI chat layout) and input_ids
(list<int32>). Files:
  pyarrow_<codec>_v<1|2>_<dict|plain>.parquet  pyarrow, every codec (none, snappy, gzip, brotli,
      lz4, zstd) x data page v1 / v2 x dictionary on / off; row groups of 8 rows, 512-byte pages.
  pyarrow_delta.parquet   DELTA_BINARY_PACKED ints, DELTA_LENGTH_BYTE_ARRAY / DELTA_BYTE_ARRAY text,
      BYTE_STREAM_SPLIT doubles (data page v2).
  polars_<codec>.parquet  polars' write_parquet (its default zstd, and snappy; row groups of 8).
  duckdb_<codec>.parquet  duckdb's COPY ... (FORMAT parquet) (its default snappy, and zstd with v2 pages).
  rows.jsonl              the rows as JSON, one per line (the JSONL twin of every file).
  expected/<file>.jsonl   pq.read_table(<file>).to_pylist(), as JSON: what titan must read back.
Expected values come only from pyarrow.
"""
import argparse
import json
import os

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

SHAKESPEARE = "/work/shared/assets/text/tinyshakespeare.txt"


def rows():
    lines = [l for l in open(SHAKESPEARE, encoding="utf-8").read().split("\n") if l.strip()][:30]
    extra = ["Grüße aus Köln — ça va? 東京タワー 🗼", "", "tabs\tand\nnewlines \"quoted\" \\ backslash"]
    text = lines[:15] + extra + lines[15:30] + ["x" * 700, "the last row"]
    out = []
    for i, t in enumerate(text):
        out.append({
            "text": t,
            "id": 1_000_000_000_000 + i * 7919 if i % 5 else -i,
            "score": None if i % 4 == 3 else i * 0.25 - 3.0,
            "tags": None if i % 6 == 5 else [f"t{j}" for j in range(i % 3)],
            "meta": None if i % 7 == 6 else {"source": "play" if i % 2 else None, "line": i},
            "messages": [{"role": "user", "content": f"Say line {i}."},
                         {"role": "assistant", "content": t}],
            "input_ids": [(i * 31 + j * 17) % 1000 for j in range(i % 9 + 1)],
        })
    return out


SCHEMA = pa.schema([
    ("text", pa.string()), ("id", pa.int64()), ("score", pa.float64()), ("tags", pa.list_(pa.string())),
    ("meta", pa.struct([("source", pa.string()), ("line", pa.int32())])),
    ("messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
    ("input_ids", pa.list_(pa.int32())),
])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(os.path.join(args.out, "expected"), exist_ok=True)
    data = rows()
    table = pa.Table.from_pylist(data, schema=SCHEMA)
    with open(os.path.join(args.out, "rows.jsonl"), "w", encoding="utf-8") as f:
        for r in data:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    files = []
    for codec in ["none", "snappy", "gzip", "brotli", "lz4", "zstd"]:
        for version in ["1.0", "2.0"]:
            for dictionary in [True, False]:
                name = f"pyarrow_{codec}_v{version[0]}_{'dict' if dictionary else 'plain'}.parquet"
                pq.write_table(table, os.path.join(args.out, name), compression=codec, data_page_version=version,
                               use_dictionary=dictionary, row_group_size=8, data_page_size=512)
                files.append(name)
    pq.write_table(table, os.path.join(args.out, "pyarrow_delta.parquet"), compression="snappy",
                   data_page_version="2.0", use_dictionary=False, row_group_size=8, data_page_size=512,
                   column_encoding={"id": "DELTA_BINARY_PACKED", "text": "DELTA_BYTE_ARRAY",
                                    "messages.list.element.content": "DELTA_LENGTH_BYTE_ARRAY",
                                    "input_ids.list.element": "DELTA_BINARY_PACKED",
                                    "score": "BYTE_STREAM_SPLIT"})
    files.append("pyarrow_delta.parquet")
    frame = pl.from_arrow(table)
    for codec in ["zstd", "snappy"]:
        name = f"polars_{codec}.parquet"
        frame.write_parquet(os.path.join(args.out, name), compression=codec, row_group_size=8)
        files.append(name)
    con = duckdb.connect()
    con.register("t", table)
    for codec, extra in [("snappy", ""), ("zstd", ", ROW_GROUP_SIZE 8, PARQUET_VERSION V2")]:
        name = f"duckdb_{codec}.parquet"
        con.execute(f"COPY (SELECT * FROM t) TO '{os.path.join(args.out, name)}' "
                    f"(FORMAT parquet, COMPRESSION {codec}{extra})")
        files.append(name)
    for name in files:
        got = pq.read_table(os.path.join(args.out, name)).to_pylist()
        with open(os.path.join(args.out, "expected", name.replace(".parquet", ".jsonl")), "w", encoding="utf-8") as f:
            for r in got:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        meta = pq.ParquetFile(os.path.join(args.out, name)).metadata
        encodings = sorted({e for g in range(meta.num_row_groups) for c in range(meta.num_columns)
                            for e in meta.row_group(g).column(c).encodings})
        print(f"{name}: {meta.num_row_groups} row groups, {os.path.getsize(os.path.join(args.out, name))} bytes, "
              f"{meta.created_by}, encodings {encodings}")


if __name__ == "__main__":
    main()
