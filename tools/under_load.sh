#!/usr/bin/env bash
# Runs a titan training command quiet and then beside busy processes, alternating, and prints each
# run's median tokens/s (metrics.jsonl, steps after the first logged one) and the ratio loaded/quiet.
# The busy process is what a user's other work looks like to the scheduler: a single-threaded
# loop that never sleeps (BUSY=2 starts two).
#
#   tools/under_load.sh [--rounds N] -- build/titan train --config qwen3_debug ... --job.dump_folder DIR
#
# The command must write DIR/metrics.jsonl (the script reads the --job.dump_folder value).
# Needs nothing but bash, awk and sort. Timings are for docs/performance.md, never for tests.
set -euo pipefail
rounds=2
while [[ $# -gt 0 && $1 != -- ]]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    *) echo "under_load.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
[[ ${1:-} == -- ]] || { echo "usage: tools/under_load.sh [--rounds N] -- COMMAND..." >&2; exit 2; }
shift
cmd=("$@")
dump=""
for ((i = 0; i < ${#cmd[@]}; ++i)); do
  [[ ${cmd[i]} == --job.dump_folder ]] && dump=${cmd[i + 1]}
done
[[ -n $dump ]] || { echo "under_load.sh: the command needs --job.dump_folder DIR" >&2; exit 2; }

# median_tps: the median "tps" of metrics.jsonl's lines after the first (warm-up).
median_tps() {
  grep -o '"tps":[0-9.e+]*' "$dump/metrics.jsonl" | tail -n +2 | cut -d: -f2 | sort -g |
    awk '{v[NR] = $1} END {if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

run_once() {
  rm -rf "$dump"
  "${cmd[@]}" > /dev/null 2>&1
  median_tps
}

busy_pids=()
start_busy() {
  for ((b = 0; b < ${BUSY:-1}; ++b)); do
    bash -c 'while :; do :; done' &
    busy_pids+=($!)
  done
}
stop_busy() {
  if [[ ${#busy_pids[@]} -gt 0 ]]; then
    kill "${busy_pids[@]}" 2> /dev/null || true
    wait "${busy_pids[@]}" 2> /dev/null || true
  fi
  busy_pids=()
  return 0
}
trap stop_busy EXIT

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | xargs) model $(grep -m1 '^model\s' /proc/cpuinfo | cut -d: -f2 | xargs), $(getconf _NPROCESSORS_ONLN) cpus; busy processes: ${BUSY:-1}"
for ((r = 1; r <= rounds; ++r)); do
  quiet=$(run_once)
  start_busy
  loaded=$(run_once)
  stop_busy
  awk -v r="$r" -v q="$quiet" -v l="$loaded" 'BEGIN {printf "round %d: quiet %.1f tokens/s, beside busy %.1f tokens/s, ratio %.2f\n", r, q, l, (q > 0 ? l / q : 0)}'
done
