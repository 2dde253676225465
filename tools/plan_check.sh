#!/usr/bin/env bash
# titan plan (the meta device) against the allocator peak a real run measures (the metrics' memory
# field of rank 0, the largest over steps >= 2), run by run. Issue 28's acceptance list:
#
#   tools/plan_check.sh BUILD_DIR debug    debug dense, debug MoE (aux loss and bias balancing), each
#                                          activation-checkpointing mode, bf16, FSDP 2, TP 2, pp=2 1F1B,
#                                          ep=2, and a plugin module keeping an extra tensor
#                                          (tests/plugins/keep_output.cpp)
#   tools/plan_check.sh BUILD_DIR bench    Qwen3-0.6B x 4 layers at T = 2048, fp32 and bf16, each
#                                          activation-checkpointing mode (minutes per run on 2 cores)
#
# Prints one line per run: measured GiB, planned GiB, planned / measured. Needs ../shared (the corpus,
# and the Qwen3 tokenizer for `bench`) and, for the multi-rank runs, mpirun.
set -euo pipefail
build=$(realpath "$1"); set_name=$2
titan=$build/titan
shared=$(realpath "$(dirname "$0")/../../shared/assets")
work=$(mktemp -d /tmp/titan_plan_check.XXXXXX)
trap 'rm -rf "$work"' EXIT
corpus=$shared/text/tinyshakespeare.txt
mpi=(mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1)
[[ $(id -u) == 0 ]] && mpi+=(--allow-run-as-root)

# check NAME RANKS TP EP ARGS...: one training run of 3 steps and the plan's row for (tp, ep).
check() {
  local name=$1 ranks=$2 tp=$3 ep=$4; shift 4
  local args=(--training.steps 3 --metrics.log_freq 1 --job.dump_folder "$work/$name" --training.dataset_path "$corpus" "$@")
  if [[ $ranks == 1 ]]; then
    "$titan" train "${args[@]}" > "$work/$name.log" 2>&1
  else
    "${mpi[@]}" -np "$ranks" "$titan" train "${args[@]}" > "$work/$name.log" 2>&1
  fi
  local measured planned
  measured=$(grep -o '"memory_gib":[0-9.e+-]*' "$work/$name/metrics.jsonl" | tail -n +2 | cut -d: -f2 | sort -g | tail -1)
  # The plan's table: columns after the marker are [pp pp_rank] dp_replicate shard tp ep params optim step total.
  planned=$("$titan" plan --world-size "$ranks" "${args[@]}" 2> /dev/null | sed -n '/dp_replicate/,/^$/p' | sed 's/^->//' |
            awk -v tp="$tp" -v ep="$ep" 'NR > 1 && NF >= 10 { o = (NF >= 12 && $0 ~ /^ *[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ *$/) ? 2 : 0;
              if ($(3 + o) == tp && $(4 + o) == ep) { print $(8 + o); exit } }')
  awk -v n="$name" -v m="$measured" -v p="$planned" 'BEGIN { printf "%-28s measured %8.4f GiB  planned %8.4f GiB  ratio %.4f\n", n, m, p, p / m }'
}

if [[ $set_name == debug ]]; then
  tok=$work/tok
  "$titan" train-tokenizer --input "$corpus" --vocab-size 2048 --out "$tok" > /dev/null
  d=(--config qwen3_debug --model.hf_assets_path "$tok")
  moe=("${d[@]}" --model.name debug_moe)
  check dense 1 1 1 "${d[@]}"
  check moe_aux_loss 1 1 1 "${moe[@]}" --model.load_balance aux_loss
  check moe_bias 1 1 1 "${moe[@]}" --model.load_balance bias
  check ac_selective_op 1 1 1 "${d[@]}" --activation_checkpoint.mode selective --activation_checkpoint.selective_ac_option op
  check ac_selective_2 1 1 1 "${d[@]}" --activation_checkpoint.mode selective --activation_checkpoint.selective_ac_option 2
  check ac_full 1 1 1 "${d[@]}" --activation_checkpoint.mode full
  check bf16 1 1 1 "${d[@]}" --training.mixed_precision_param bfloat16
  check plugin_keep_output 1 1 1 "${d[@]}" --override.imports "$build/plugins/test_keep_output.so"
  check fsdp2 2 1 1 "${d[@]}" --training.local_batch_size 4
  check tp2 2 2 1 "${d[@]}" --parallelism.tensor_parallel_degree 2
  check pp2_1f1b 2 1 1 "${d[@]}" --parallelism.pipeline_parallel_degree 2 --parallelism.pipeline_parallel_microbatch_size 2
  check ep2 2 1 2 "${moe[@]}" --training.local_batch_size 4 --parallelism.expert_parallel_degree 2
elif [[ $set_name == bench ]]; then
  b=(--config qwen3_0_6b --model.n_layers 4 --model.hf_assets_path "$shared/qwen3-tokenizer" --training.local_batch_size 1
     --training.seq_len 2048 --lr_scheduler.warmup_steps 0)
  for precision in float32 bfloat16; do
    check "0.6Bx4 $precision none" 1 1 1 "${b[@]}" --training.mixed_precision_param $precision
    check "0.6Bx4 $precision sel-op" 1 1 1 "${b[@]}" --training.mixed_precision_param $precision \
      --activation_checkpoint.mode selective --activation_checkpoint.selective_ac_option op
    check "0.6Bx4 $precision sel-2" 1 1 1 "${b[@]}" --training.mixed_precision_param $precision \
      --activation_checkpoint.mode selective --activation_checkpoint.selective_ac_option 2
    check "0.6Bx4 $precision full" 1 1 1 "${b[@]}" --training.mixed_precision_param $precision --activation_checkpoint.mode full
  done
else
  echo "usage: tools/plan_check.sh BUILD_DIR debug|bench" >&2
  exit 2
fi
