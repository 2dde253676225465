#!/usr/bin/env python3
"""Checks a TensorBoard event file written by titan (src/titan/train/tensorboard.cpp) with the
`tensorboard` package itself, as the TensorBoard UI would read it. Not run in CI.

  python3 tools/check_tfevents.py PATH [PATH ...]    (PATH: an events.out.tfevents.* file or a folder)

Three passes per file:
  1. records: tensorboard's TFRecord reader (which checks both masked CRC32Cs) must consume the
     whole file; it stops silently at a bad or torn record, so the bytes it read (record + 16 each)
     must add up to the file size;
  2. protos: every record parses as tensorboard.Event; the first holds file_version "brain.Event:2";
  3. scalars: EventAccumulator (the UI's loader) lists the scalar tags; each tag's steps and values
     are printed.
Exits 1 if a file does not load, does not add up, or has no scalars.

Requires: pip install tensorboard (no TensorFlow needed).
"""
import argparse
import glob
import math
import os
import sys

from tensorboard.backend.event_processing import event_file_loader
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.proto import event_pb2


def event_files(path):
    if os.path.isdir(path):
        return sorted(glob.glob(os.path.join(path, "events.out.tfevents.*")))
    return [path]


def check_file(path, max_rows):
    problems = []
    records = list(event_file_loader.RawEventFileLoader(path).Load())
    consumed = sum(len(r) + 16 for r in records)  # 8 length + 4 crc + data + 4 crc
    size = os.path.getsize(path)
    print(f"{path}: {len(records)} records, {consumed} of {size} bytes read")
    if consumed != size:
        problems.append(f"reader stopped after {consumed} of {size} bytes (bad CRC or torn record)")
    if not records:
        return problems + ["no records"]

    events = [event_pb2.Event.FromString(r) for r in records]
    first = events[0]
    print(f"  first event: file_version={first.file_version!r} wall_time={first.wall_time:.3f}")
    if first.file_version != "brain.Event:2":
        problems.append(f"first event file_version is {first.file_version!r}, want 'brain.Event:2'")

    acc = EventAccumulator(path, size_guidance={"scalars": 0})  # 0 = keep every point
    acc.Reload()
    tags = acc.Tags().get("scalars", [])
    if not tags:
        problems.append("no scalars")
    for tag in tags:
        points = acc.Scalars(tag)
        num_nonfinite = sum(1 for p in points if not math.isfinite(p.value))
        print(f"  {tag}: {len(points)} points, steps {points[0].step}..{points[-1].step}"
              + (f", {num_nonfinite} non-finite" if num_nonfinite else ""))
        half = max(max_rows, 0) // 2
        cut = len(points) > max_rows
        shown = points[:half] + points[len(points) - half:] if cut else points
        for i, p in enumerate(shown):
            if cut and i == half:
                print("    ...")
            print(f"    step {p.step:>8}  value {p.value:.7g}  wall_time {p.wall_time:.3f}")
        if cut and not shown:
            print("    ...")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--max-rows", type=int, default=10, help="points printed per tag")
    args = parser.parse_args()
    failed = False
    for arg in args.paths:
        files = event_files(arg)
        if not files:
            print(f"FAIL {arg}: no events.out.tfevents.* file", file=sys.stderr)
            failed = True
        for path in files:
            try:
                problems = check_file(path, args.max_rows)
            except Exception as e:  # a file that does not load at all
                problems = [f"{type(e).__name__}: {e}"]
            for p in problems:
                print(f"FAIL {path}: {p}", file=sys.stderr)
            failed |= bool(problems)
            if not problems:
                print(f"OK {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
