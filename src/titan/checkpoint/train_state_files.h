// The pieces of the native checkpoint format that both save paths write (train_state.cpp: one
// process; train_state_sharded.cpp: every rank of a job) and the reader checks: file names, the
// per-file digest, state.json, the manifest's tensor entries, installing a folder atomically and
// pruning old ones. Internal to the checkpoint library; the format is train_state.md.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "titan/checkpoint/train_state.h"

namespace titan::ckpt::detail {

using nlohmann::ordered_json;

inline constexpr const char* kFormat = "titan.train_state";
inline constexpr const char* kModelFile = "model.safetensors";
inline constexpr const char* kOptimizerFile = "optimizer.safetensors";
inline constexpr const char* kStateFile = "state.json";
inline constexpr const char* kConfigFile = "config.toml";
inline constexpr const char* kManifestFile = "manifest.json";

std::string hex32(uint32_t v);

struct FileDigest {
  uint64_t size = 0;
  uint32_t crc = 0;
};
// Streams the file through crc32c (checkpoints can be larger than memory would like).
FileDigest digest_file(const std::string& path);
void fsync_dir(const std::string& dir);
bool process_alive(long pid);
int64_t parse_count(const std::string& s);  // -1 unless s is a decimal count

ordered_json shape_json(const Shape& shape);
// The manifest entries of tensors stored whole in `file`.
ordered_json tensors_json(const NamedTensors& tensors, const char* file);
std::string state_json_text(const TrainState& s, bool model_only);
// Every file of a single-process save into `dir`, the manifest last.
void write_files(const std::string& dir, const TrainState& s);
// Moves `tmp` to `final_dir`. When final_dir exists (a step saved again, e.g. after resuming
// from an older step), the two are exchanged atomically and the old content removed.
void install_dir(const std::string& tmp, const std::string& final_dir, const std::string& replaced);
// keep_latest_k: the newest k step folders stay, and always `keep`.
void prune(const std::string& folder, int64_t keep_latest_k, int64_t keep);

}  // namespace titan::ckpt::detail
