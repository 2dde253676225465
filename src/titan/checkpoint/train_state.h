// Native training checkpoints: everything a run needs to continue to the bit, in one folder per
// step. Format, atomicity and the sharding description: train_state.md next to this file.
//
//   <folder>/step-<N>/  model.safetensors      parameters by FQN (fp32 today)
//                       optimizer.safetensors  "<fqn>.exp_avg", "<fqn>.exp_avg_sq" (absent: model-only)
//                       state.json             step, tokens seen, seed, optimizer step, loader cursor
//                       config.toml            the resolved config of the run that saved it
//                       manifest.json          written last: every file (size, crc32c) and every
//                                              tensor (global shape, dtype, shards)
//
// This library depends on core only (STYLE.md), so the trainer passes plain data: tensors by name,
// the loader cursor as the JSON that data::LoaderState::to_json wrote, the config as TOML text.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "titan/core/tensor.h"

namespace titan::ckpt {

inline constexpr int kTrainStateVersion = 1;

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Where a tensor of a sharded save sits in its global tensor shaped `shape`: the flat (row-major)
// elements [start, start + numel) (FSDP's flat shards give such ranges) of the whole tensor, or,
// with tensor parallelism (tp_dim >= 0), of slice tp_rank of tp_degree along dim tp_dim: of every
// one of tp_sections (the dimension's parts, e.g. a fused [q | k | v]; none: one part), as
// core/slices.h cuts it.
struct TensorPiece {
  Shape shape;
  int64_t start = 0;
  int tp_dim = -1;
  int64_t tp_rank = 0;
  int64_t tp_degree = 1;
  std::vector<int64_t> tp_sections = {};
};

struct TrainState {
  int64_t step = 0;         // optimizer steps completed; the run continues at step + 1
  int64_t tokens_seen = 0;  // training tokens consumed by those steps (all ranks)
  uint64_t seed = 0;        // training.seed: weights init from counter-based streams keyed by FQN
  int64_t optimizer_step = 0;     // AdamW's step count (bias correction)
  std::string loader_state_json;  // data::LoaderState::to_json() after the last consumed batch
  std::string config_toml;        // config::to_toml of the resolved config
  NamedTensors model;             // parameters, by FQN
  NamedTensors optimizer;         // "<fqn>.exp_avg" / "<fqn>.exp_avg_sq"; empty = a model-only save
  // For save_train_state_sharded: empty (every tensor whole) or one per tensor of model /
  // optimizer. Loading always gives whole tensors (pieces assembled), whatever the saving mesh.
  std::vector<TensorPiece> model_pieces;
  std::vector<TensorPiece> optimizer_pieces;

  bool model_only() const { return optimizer.empty(); }
};

// "step-<N>" (no padding: folders are ordered by the parsed number, not by name).
std::string step_dir_name(int64_t step);

// Writes `state` to <folder>/step-<state.step> atomically: into <folder>/.step-<N>.tmp-<pid>/,
// every file and the folder fsync'd, manifest.json last, then renamed into place (an existing
// step-<N> is swapped out atomically and removed) and <folder> fsync'd. Then, when keep_latest_k >
// 0, step folders beyond the newest k (never the one just written) are removed, each first renamed
// to a hidden trash name so that a kill mid-removal never leaves a half folder under a step-<N>
// name. Returns the final path. Throws titan::Error (a failed save removes its tmp folder; older
// checkpoints are untouched).
std::string save_train_state(const std::string& folder, const TrainState& state, int64_t keep_latest_k = 0);

// How the ranks of a multi-rank job meet for a sharded save (the trainer implements it over its
// communicator; this library depends on core only).
struct SaveGroup {
  int rank = 0;
  int world = 1;
  std::function<std::vector<std::string>(const std::string&)> all_gather;  // every rank's string, rank order
  std::function<std::string(const std::string&)> broadcast;               // rank 0's string, on every rank
};

// The multi-rank save, a collective: every rank of `group` passes its own tensors (its pieces,
// plus whole tensors that one rank alone passes, e.g. replicated buffers from rank 0; a rank may
// pass none). Rank r writes model-rank<r>-of-<w>.safetensors (and optimizer-...) into one tmp
// folder; rank 0 writes state.json and config.toml from its `mine`, then the manifest with every
// rank's files and pieces, and installs the folder as save_train_state does (atomic, pruned).
// model_only: no optimizer files (a rank's empty `optimizer` alone does not say it). Returns the
// final path on every rank; an error on any rank is thrown on every rank.
std::string save_train_state_sharded(const std::string& folder, const TrainState& mine, const SaveGroup& group,
                                     bool model_only, int64_t keep_latest_k = 0);

struct CheckpointEntry {
  int64_t step = 0;
  std::string path;
};

// The step-<N> folders of `folder`, newest (highest N) first; empty when the folder is missing.
std::vector<CheckpointEntry> list_checkpoints(const std::string& folder);

// "" when `dir` is a complete checkpoint: manifest.json parses, has this format and version, and
// every file it lists exists with the recorded size and crc32c. Otherwise one line saying what is
// wrong ("model.safetensors: crc32c 0x1234 != 0xabcd in the manifest").
std::string check_checkpoint(const std::string& dir);

// True when the (valid) checkpoint in `dir` holds no optimizer state.
bool checkpoint_is_model_only(const std::string& dir);

// The checkpoint to resume from. load_step >= 0: exactly <folder>/step-<load_step>, which must
// exist and be valid (else throws, listing the steps there). load_step = -1: the newest valid one;
// each newer invalid one is reported with log_warn (what is wrong) and skipped. need_optimizer
// skips (with log_info) model-only checkpoints too. nullopt when the folder holds no step-<N>
// folder at all; throws when it holds some but none qualifies, since starting afresh beside them
// would hide the problem.
std::optional<CheckpointEntry> find_checkpoint(const std::string& folder, int64_t load_step = -1,
                                               bool need_optimizer = false);

// Reads and validates (check_checkpoint) the checkpoint in `dir`. Tensors are zero-copy views of
// the mapped files. model_only = true skips optimizer.safetensors. Throws naming the file and field.
TrainState load_train_state(const std::string& dir, bool model_only = false);

// Removes hidden folders (".step-<N>.tmp-<pid>", ".step-<N>.trash-<pid>", ".step-<N>.replaced-<pid>")
// left in `folder` by processes that are no longer running (or by an earlier process with this
// pid). Returns how many. A replaced step (moved aside whole) whose step-<N> is missing is renamed
// back instead; trash (a pruned step, possibly half deleted) is always deleted, never restored.
int remove_stale_checkpoint_dirs(const std::string& folder);

// Saves on the calling thread (async = false) or on a background thread (async = true). Async:
// save() first waits for the previous save (at most one in flight) and re-throws its error, then
// starts writing `state`, which must own its tensors (clones), since training changes the live
// ones. wait() blocks until the save in flight is done and re-throws its error; the trainer calls
// it at the end of training. The destructor waits too but only logs an error (it may run while an
// exception unwinds).
class CheckpointWriter {
 public:
  explicit CheckpointWriter(bool async) : async_(async) {}
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  bool async() const { return async_; }
  void save(const std::string& folder, TrainState state, int64_t keep_latest_k);
  void wait();

 private:
  bool async_;
  std::thread thread_;
  std::exception_ptr error_;  // set by the writer thread, read after join
};

}  // namespace titan::ckpt
