#!/usr/bin/env bash
# The whole test suite: install what is missing, build with warnings as errors, run every test
# (ctest); then rebuild with AddressSanitizer + UndefinedBehaviorSanitizer and run it again. The
# second pass also compiles only the AVX2 baseline kernels and caps oneDNN at AVX2, so the path an
# AVX2-only machine takes is tested too (the first pass tests the AVX-512 path this CPU picks).
# Third, the libFuzzer targets (tests/fuzz) are built with clang and run over their seed corpora
# plus a few hundred mutations, so they keep building and running; fuzzing for real is manual
# (tests/fuzz/README.md). SANITIZE=0 skips the second pass, FUZZ=0 the third (for a quick local loop).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc)
# lld links the test executables (5 of them with MPI, plus hf_reexport, and comm_p2p with MPI; each a static link of the libraries)
# several times faster than GNU ld, most of all with sanitizers; the sanitizer pass keeps line
# tables only (-g1).
lld=(-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_MODULE_LINKER_FLAGS=-fuse-ld=lld
     -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld)

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTITAN_WERROR=ON "${lld[@]}" > /dev/null
ninja -C build
(cd build && ctest --output-on-failure -j "$jobs")

if [[ "${SANITIZE:-1}" != 0 ]]; then
  cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1" \
    -DTITAN_SANITIZE=ON -DTITAN_BASELINE_ONLY=ON -DTITAN_WERROR=ON -DTITAN_BUILD_BENCH=OFF "${lld[@]}" > /dev/null
  ninja -C build-sanitize
  # Multi-rank tests under the sanitizers: the ones that together run every parallel code path
  # (FSDP x TP with sequence parallelism, TP without it, HSDP, resharded resumes, the gathered HF
  # export); the others repeat those paths with other degrees and run in the first pass, as do the
  # multi-host tests (FSDP again, over TCP between network namespaces).
  mpi_repeats='CliParallel\.(FsdpTwoRanks|FsdpFourRanks|ReplicateOnly|TensorParallelMatchesOneRank|Launch|DeadRank|BadMeshes)|CliMultiHost\.'
  (cd build-sanitize && DNNL_MAX_CPU_ISA=AVX2 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --output-on-failure -j "$jobs" -E "$mpi_repeats")
fi

if [[ "${FUZZ:-1}" != 0 ]]; then
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTITAN_FUZZ=ON \
    -DTITAN_WERROR=ON -DTITAN_BUILD_TESTS=OFF -DTITAN_BUILD_BENCH=OFF "${lld[@]}" > /dev/null
  ninja -C build-fuzz safetensors_fuzz hf_config_fuzz jinja_fuzz
  scratch=$(mktemp -d)  # new inputs go here, never into the committed seed corpus
  trap 'rm -rf "$scratch"' EXIT
  for target in safetensors hf_config jinja; do
    mkdir -p "$scratch/$target"
    build-fuzz/tests/fuzz/${target}_fuzz -runs=500 -seed=1 -dict="tests/fuzz/$target.dict" \
      -artifact_prefix="$scratch/" "$scratch/$target" "tests/fuzz/corpus/$target"
  done
fi
