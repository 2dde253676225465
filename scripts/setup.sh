#!/usr/bin/env bash
# Installs the Debian 12 packages titan builds with, when missing. Idempotent; needs root
# (or sudo) only when something is missing.
set -euo pipefail

# libeigen3-dev: header-only, used by bench/gemm_libs_bench only. pkg-config, libpcre2-dev, libutf8proc-dev: the
# tokenizer (pre-tokenizer regexes, NFC). libzstd-dev: streaming .zst datasets.
# libsnappy-dev, zlib1g-dev, libbrotli-dev, liblz4-dev (+ libzstd-dev): the codecs of Parquet datasets.
# libtomlplusplus-dev: TOML job config files (titan_config).
# clang, libclang-rt-14-dev (libFuzzer + sanitizer runtimes), libomp-dev (clang's OpenMP): the fuzz
# targets in tests/fuzz (scripts/test.sh builds them). lld: the test builds link with it (faster).
# libopenmpi-dev, openmpi-bin: the MPI communicator and mpirun (multi-rank training, titan launch).
# iproute2 (`ip netns`): the multi-host test plays two hosts with network namespaces.
packages=(g++ cmake ninja-build libdnnl-dev nlohmann-json3-dev libgtest-dev libgmock-dev libeigen3-dev
          pkg-config libpcre2-dev libutf8proc-dev libzstd-dev libtomlplusplus-dev
          libsnappy-dev zlib1g-dev libbrotli-dev liblz4-dev
          clang libclang-rt-14-dev libomp-dev lld libopenmpi-dev openmpi-bin iproute2)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  echo "[setup] installing: ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}"
fi
