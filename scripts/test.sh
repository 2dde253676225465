#!/usr/bin/env bash
# The whole test suite, in three passes; each proves something the others do not.
#
# 1. Release, warnings as errors: every test (ctest). The kernels this CPU picks (AVX-512 / bf16
#    where it has them), every op against its reference and finite differences, HF parity, every
#    CLI command, every parallel layout on 1, 2 and 4 ranks, multi-host over network namespaces.
# 2. AddressSanitizer + UndefinedBehaviorSanitizer, AVX2 baseline kernels only and oneDNN capped at
#    AVX2: the path an AVX2-only machine takes, and memory/UB errors on every code path: each op's
#    kernels, the parsers, checkpoint write/read, the CLI commands, every parallel dimension once;
#    and a few steps of the debug models must give the release build's losses bit for bit.
#    It skips the tests that repeat a path already run here with other degrees or more steps
#    (sanitizer_repeats below names each one and what covers it).
# 3. The libFuzzer targets (tests/fuzz: safetensors, config.json, Jinja, Parquet, GGUF), built with clang,
#    over their seed corpora plus a few hundred mutations, so they keep building and running; fuzzing
#    for real is manual (tests/fuzz/README.md).
# SANITIZE=0 skips the second pass, FUZZ=0 the third (for a quick local loop). Each pass prints its
# build and test seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc)
# lld links the test executables (5 of them with MPI, plus hf_reexport, and comm_p2p with MPI; each a static link of the libraries)
# several times faster than GNU ld, most of all with sanitizers; the sanitizer pass keeps line
# tables only (-g1).
lld=(-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_MODULE_LINKER_FLAGS=-fuse-ld=lld
     -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld)

# timed NAME CMD...: runs CMD and prints how long it took, so CI's log gives each pass's figures.
timed() {
  local name=$1 start=$SECONDS
  shift
  "$@"
  echo "[test] $name: $((SECONDS - start)) s"
}

# The sanitizer build trains the release build's float32 bits (oneDNN at AVX2 in both; the
# release build's x86-64-v4 kernels equal its AVX2 ones, Mode::isa_levels): kernels fuse products
# into adds explicitly (simd.h), since which product GCC fused by itself changed under
# AddressSanitizer once, and every float32 tolerance test of the sanitizer pass moved with it.
same_bits_as_release() {
  local dir model b
  dir=$(mktemp -d)
  build/titan train-tokenizer --dataset quickstart --vocab-size 2048 --out "$dir/tok" > /dev/null 2>&1
  for model in debug debug_moe; do
    for b in build build-sanitize; do
      DNNL_MAX_CPU_ISA=AVX2 ASAN_OPTIONS=detect_leaks=0 OMP_NUM_THREADS=2 "$b/titan" train --config qwen3_debug \
        --model.name "$model" --training.steps 5 --training.deterministic --metrics.log_freq 1 \
        --model.hf_assets_path "$dir/tok" --job.dump_folder "$dir/$b-$model" > /dev/null 2>&1
      grep -o '"loss":[^,]*,"grad_norm":[^,]*' "$dir/$b-$model/metrics.jsonl" > "$dir/$b-$model.txt" || true
    done
    if [[ ! -s "$dir/build-$model.txt" ]] || ! cmp -s "$dir/build-$model.txt" "$dir/build-sanitize-$model.txt"; then
      echo "[test] the sanitizer build's $model losses differ from the release build's:"
      paste "$dir/build-$model.txt" "$dir/build-sanitize-$model.txt"
      rm -rf "$dir"
      return 1
    fi
  done
  rm -rf "$dir"
}

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTITAN_WERROR=ON "${lld[@]}" > /dev/null
timed "release build" ninja -C build
(cd build && timed "release tests" ctest --output-on-failure -j "$jobs")

if [[ "${SANITIZE:-1}" != 0 ]]; then
  cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1" \
    -DTITAN_SANITIZE=ON -DTITAN_BASELINE_ONLY=ON -DTITAN_WERROR=ON -DTITAN_BUILD_BENCH=OFF "${lld[@]}" > /dev/null
  timed "sanitizer build" ninja -C build-sanitize
  # Tests the sanitizer pass skips: each repeats a code path that a test kept here runs too.
  #   CliParallel.FsdpTwoRanks / FsdpFourRanks / TensorParallelMatchesOneRank: FsdpTimesTensorParallel;
  #   ReplicateOnly: Hsdp; Launch*: CliLaunch.*; DeadRank*: CliParallel.SigtermToOneRank (a rank's
  #   exit ending the job); BadMeshes: the same validation as the unit tests of the mesh.
  #   CliMultiHost.*: FSDP again, over TCP between network namespaces.
  #   CliTrain.LearnsBeyondUnigram (60 steps): CliTrain.DeterministicRunsAreBitIdentical's train loop.
  #   CliTrain.Bf16TracksFloat32 (2 x 60 steps): CliValidation.Bf16WithActivationCheckpointing (bf16
  #   training with every recompute mode) and CliParallel.Bf16Meshes.
  #   CliCheckpoint.KilledAtRandomMoments (20 kills): CliCheckpoint.ResumeIsBitIdenticalAndAsyncEqualsSync
  #   (write, read, resume) and CliCheckpoint.SigtermAndSigintStopCleanly.
  #   CliChat.TrainsOnAssistantTokens (16 steps): CliChat.ResumeContinuesTheLossSequenceToTheBit.
  #   CliParallel.AuxLossMoePipeline (pp=2, the router totals between stages):
  #   CliParallel.ExpertParallelInsidePipelineStages (the same messages, with ep inside each stage).
  #   CliParallel.PlanFromTheMetaDevice (12 runs against titan plan): the meta run itself is every
  #   titan train's memory floor (each test here), and the Planner.* unit tests plan every layout kind.
  #   CliParallel.Qwen3_5Meshes (7 runs): the mesh mechanics are the Qwen3 layouts' (FSDP, pipeline,
  #   ep, a checkpoint moving between meshes, all kept here); Qwen3.5's own code runs here in
  #   Qwen3_5HfParity.*, Qwen3_5Ops.*, the ops' sweeps and ActivationCheckpoint.EveryChoice.
  #   CliParallel.Bf16OptimizerStates (4 runs on FSDP / TP): the meshes move bf16 moments as they move
  #   f32 ones (kept here: FsdpTimesTensorParallel, the checkpoint moves); the bf16 moments themselves run
  #   in AdamW.* (both dtypes) and CliCheckpoint.Bf16OptimizerStatesResumeBitIdentically.
  #   CliParallel.PipelineSchedulesMatchOneRank (4 meshes, ~27 s here): the schedules are pure data
  #   (PipelineSchedule.* unit tests), the stages' messages run in InterleavedAndFourStagePipelines
  #   and PipelineWithAccumulationAndCheckpointing, pp x tp in PipelineTimesTensorParallelExport.
  #   CliParallel.ExpertParallelMatchesOneRank (6 runs, ~48 s here): the all-to-all exchange, the
  #   expert_dp sums and both balancings run in ExpertParallelCheckpointMovesToOneRankAndBack and
  #   ExpertParallelInsidePipelineStagesMatchesOneRank.
  sanitizer_repeats='CliParallel\.(FsdpTwoRanks|FsdpFourRanks|ReplicateOnly|TensorParallelMatchesOneRank|Launch|DeadRank|BadMeshes|AuxLossMoePipeline|PlanFromTheMetaDevice|Qwen3_5Meshes|Bf16OptimizerStates|PipelineSchedules|ExpertParallelMatches)|CliMultiHost\.'
  sanitizer_repeats+='|CliTrain\.(LearnsBeyondUnigram|Bf16TracksFloat32)|CliCheckpoint\.KilledAtRandomMoments'
  sanitizer_repeats+='|CliChat\.TrainsOnAssistantTokens'
  (cd build-sanitize && DNNL_MAX_CPU_ISA=AVX2 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    timed "sanitizer tests" ctest --output-on-failure -j "$jobs" -E "$sanitizer_repeats")
  timed "sanitizer bits" same_bits_as_release
fi

if [[ "${FUZZ:-1}" != 0 ]]; then
  fuzz_start=$SECONDS
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTITAN_FUZZ=ON \
    -DTITAN_WERROR=ON -DTITAN_BUILD_TESTS=OFF -DTITAN_BUILD_BENCH=OFF "${lld[@]}" > /dev/null
  ninja -C build-fuzz safetensors_fuzz hf_config_fuzz jinja_fuzz parquet_fuzz gguf_fuzz
  scratch=$(mktemp -d)  # new inputs go here, never into the committed seed corpus
  trap 'rm -rf "$scratch"' EXIT
  for target in safetensors hf_config jinja parquet gguf; do
    mkdir -p "$scratch/$target"
    build-fuzz/tests/fuzz/${target}_fuzz -runs=500 -seed=1 -dict="tests/fuzz/$target.dict" \
      -artifact_prefix="$scratch/" "$scratch/$target" "tests/fuzz/corpus/$target"
  done
  echo "[test] fuzz build and smoke: $((SECONDS - fuzz_start)) s"
fi
