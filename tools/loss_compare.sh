#!/usr/bin/env bash
# The refactor rule (STYLE.md habit 9): record the logged loss sequences of a fixed set of runs with
# one titan binary, to compare (`diff -r`) with the same set from another binary. Bit-identical
# means the files are equal: metrics.jsonl writes doubles with round-trip precision.
#
#   tools/loss_compare.sh BUILD_DIR OUT_DIR [OLD_OUT_DIR]
#
# The data is fixed (tinyshakespeare from ../shared, not the built-in corpus, which is made of the
# sources being changed) and so is the tokenizer: OUT_DIR/tokenizer, trained once, or taken from
# OLD_OUT_DIR when given. With OLD_OUT_DIR, the new binary also resumes the old binary's step-10
# checkpoint (OLD_OUT_DIR/ckpt-step-10) to step 20: resumed_old.txt must equal the old resumed.txt.
#
# Runs (the MPI ones need titan built with MPI; every run uses training.deterministic):
#   dense      qwen3_debug, 200 steps
#   moe_aux    debug_moe, 50 steps, HF aux-loss balancing
#   moe_bias   debug_moe, 50 steps, torchtitan bias balancing
#   qwen3_5    qwen3_5_debug, 30 steps;  qwen3_5_moe: debug_qwen3_5_moe, 30 steps, aux-loss balancing
#   fsdp2      2 ranks, dp_shard=2;  tp2: 2 ranks, tp=2;  fsdp2_tp2: 4 ranks, dp_shard=2 x tp=2
#   pp2        2 ranks, 1F1B pipeline of 2 stages, 2 micro-batches
#   ep2        debug_moe on 2 ranks, ep=2 (bias balancing)
#   resumed    qwen3_debug 20 steps with checkpoints every 5, stopped at 10 and rerun to 20
#   export     6 steps with --checkpoint.last_save_in_hf (the HF folder is kept for cmp)
# Each run's step, loss, grad_norm, lr, aux_loss and expert load go to OUT_DIR/<run>.txt.
set -euo pipefail
build=$(realpath "$1"); out=$(realpath -m "$2"); old=${3:+$(realpath "$3")}
mkdir -p "$out"
titan=$build/titan
corpus=$(realpath "$(dirname "$0")/../../shared/assets/text/tinyshakespeare.txt")
tok=$out/tokenizer
if [[ -n $old ]]; then
  rm -rf "$tok"; cp -r "$old/tokenizer" "$tok"
elif [[ ! -f $tok/tokenizer.json ]]; then
  "$titan" train-tokenizer --input "$corpus" --vocab-size 2048 --out "$tok" > /dev/null
fi
runs=$out/runs
rm -rf "$runs"; mkdir -p "$runs"
common=(--model.hf_assets_path "$tok" --training.dataset_path "$corpus" --metrics.log_freq 1 --metrics.peak_tflops 1 --training.deterministic)
small=(--model.n_layers 2 --training.seq_len 64 --training.steps 20 --lr_scheduler.warmup_steps 2
       --lr_scheduler.decay_ratio 0 --training.local_batch_size 2)
mpi=(mpirun --oversubscribe --bind-to none)
[[ $(id -u) == 0 ]] && mpi+=(--allow-run-as-root)
extract() {  # metrics.jsonl -> one line per step, every field that a refactor must keep
  sed -E 's/"(seconds|tps|tflops|mfu|memory[a-z_]*|data_wait[a-z_]*|comm_[a-z_]*|time[a-z_]*)":[^,}]*,?//g' \
    "$1/metrics.jsonl" > "$2"
}
train() { local name=$1; shift; "$titan" train "$@" "${common[@]}" --job.dump_folder "$runs/$name" > "$runs/$name.log" 2>&1; }

train dense --config qwen3_debug --training.steps 200
extract "$runs/dense" "$out/dense.txt"
train moe_aux --config qwen3_debug --model.name debug_moe --model.load_balance aux_loss --training.steps 50
extract "$runs/moe_aux" "$out/moe_aux.txt"
train moe_bias --config qwen3_debug --model.name debug_moe --model.load_balance bias --training.steps 50
extract "$runs/moe_bias" "$out/moe_bias.txt"
train qwen3_5 --config qwen3_5_debug --training.steps 30
extract "$runs/qwen3_5" "$out/qwen3_5.txt"
train qwen3_5_moe --config qwen3_5_debug --model.name debug_qwen3_5_moe --model.load_balance aux_loss --training.steps 30
extract "$runs/qwen3_5_moe" "$out/qwen3_5_moe.txt"
for layout in "fsdp2 2 --parallelism.data_parallel_shard_degree 2" "tp2 2 --parallelism.tensor_parallel_degree 2" \
              "fsdp2_tp2 4 --parallelism.tensor_parallel_degree 2"; do
  read -r name ranks flag degree <<< "$layout"
  OMP_NUM_THREADS=1 "${mpi[@]}" -np "$ranks" "$titan" train --config qwen3_debug "${small[@]}" "${common[@]}" \
    "$flag" "$degree" --job.dump_folder "$runs/$name" > "$runs/$name.log" 2>&1
  extract "$runs/$name" "$out/$name.txt"
done
OMP_NUM_THREADS=1 "${mpi[@]}" -np 2 "$titan" train --config qwen3_debug "${small[@]}" "${common[@]}" \
  --parallelism.pipeline_parallel_degree 2 --job.dump_folder "$runs/pp2" > "$runs/pp2.log" 2>&1
extract "$runs/pp2" "$out/pp2.txt"
OMP_NUM_THREADS=1 "${mpi[@]}" -np 2 "$titan" train --config qwen3_debug "${small[@]}" "${common[@]}" \
  --model.name debug_moe --model.load_balance bias --parallelism.expert_parallel_degree 2 \
  --job.dump_folder "$runs/ep2" > "$runs/ep2.log" 2>&1
extract "$runs/ep2" "$out/ep2.txt"
ck=(--config qwen3_debug --checkpoint.enable --checkpoint.interval 5 --no-checkpoint.last_save_model_only)
train resumed "${ck[@]}" --training.steps 10
rm -rf "$out/ckpt-step-10"; cp -r "$runs/resumed/checkpoint/step-10" "$out/ckpt-step-10"
train resumed "${ck[@]}" --training.steps 20
extract "$runs/resumed" "$out/resumed.txt"
if [[ -n $old ]]; then
  mkdir -p "$runs/resume_old/checkpoint"; cp -r "$old/ckpt-step-10" "$runs/resume_old/checkpoint/step-10"
  train resume_old "${ck[@]}" --training.steps 20
  extract "$runs/resume_old" "$out/resume_old.txt"
fi
train export --config qwen3_debug --training.steps 6 --checkpoint.enable --checkpoint.last_save_in_hf
extract "$runs/export" "$out/export.txt"
cp "$runs/export/checkpoint/hf/model.safetensors" "$out/export_model.safetensors"
cp "$runs/export/checkpoint/hf/config.json" "$out/export_config.json"
echo "recorded $(ls "$out"/*.txt | wc -l) loss sequences in $out"
