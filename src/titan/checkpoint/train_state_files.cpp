#include "titan/checkpoint/train_state_files.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>  // renameat2, RENAME_NOREPLACE, RENAME_EXCHANGE (glibc >= 2.28)
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <map>
#include <set>
#include <tuple>

#include "titan/checkpoint/atomic_file.h"
#include "titan/checkpoint/json_file.h"
#include "titan/checkpoint/safetensors.h"
#include "titan/core/crc32c.h"
#include "titan/core/error.h"
#include "titan/core/path_check.h"
#include "titan/core/log.h"


namespace titan::ckpt::detail {

namespace fs = std::filesystem;

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

// Streams the file through crc32c (checkpoints can be larger than memory would like).
FileDigest digest_file(const std::string& path) {
  std::string problem;
  const int fd = open_regular_file(path, &problem);
  TITAN_CHECK(fd >= 0, "[checkpoint] cannot read ", path, ": ", problem);
  FileDigest d;
  std::vector<char> buf(4 << 20);
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      TITAN_FAIL("[checkpoint] reading ", path, " failed: ", std::strerror(err));
    }
    if (n == 0) break;
    d.crc = crc32c(buf.data(), static_cast<size_t>(n), d.crc);
    d.size += static_cast<uint64_t>(n);
  }
  ::close(fd);
  return d;
}

// fsync of a folder, so that the names in it (a rename, a new file) survive a machine crash.
// Filesystems that cannot fsync a directory (EINVAL) have nothing more to offer; that is not an error.
void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  TITAN_CHECK(fd >= 0, "[checkpoint] cannot open folder ", dir, " to fsync it: ", std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  TITAN_CHECK(rc == 0 || err == EINVAL || err == ENOTSUP, "[checkpoint] fsync of folder ", dir,
              " failed: ", std::strerror(err));
}

bool process_alive(long pid) {
  if (pid <= 0) return false;
  if (pid == static_cast<long>(::getpid())) return false;  // an earlier process that had our pid
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

// "123" -> 123; anything else (empty, sign, junk, overflow) -> -1.
int64_t parse_count(const std::string& s) {
  if (s.empty() || s.size() > 18) return -1;
  int64_t v = 0;
  for (const char ch : s) {
    if (ch < '0' || ch > '9') return -1;
    v = v * 10 + (ch - '0');
  }
  return v;
}

ordered_json shape_json(const Shape& shape) {
  ordered_json a = ordered_json::array();
  for (const int64_t d : shape) a.push_back(d);
  return a;
}

// Global shape, dtype and sharding of each tensor of one group. Today every tensor is whole on
// rank 0 of 1 (dim null); a sharded save lists one entry per rank with dim/start/length.
ordered_json tensors_json(const NamedTensors& tensors, const char* file) {
  ordered_json group = ordered_json::object();
  for (const auto& [name, t] : tensors) {
    ordered_json shard = {{"rank", 0}, {"world", 1}, {"dim", nullptr}, {"file", file}, {"key", name}};
    group[name] = {{"dtype", safetensors_dtype_name(t.dtype())},
                   {"shape", shape_json(t.shape())},
                   {"shards", ordered_json::array({shard})}};
  }
  return group;
}

std::string state_json_text(const TrainState& s, bool model_only) {
  const ordered_json j = {{"format", kFormat},
                          {"version", kTrainStateVersion},
                          {"step", s.step},
                          {"tokens_seen", s.tokens_seen},
                          {"seed", s.seed},
                          {"optimizer_step", s.optimizer_step},
                          {"model_only", model_only},
                          // The LR schedule is a pure function of the step and config.toml's [lr_scheduler].
                          {"lr_schedule", {{"step", s.step}}}};
  // The loader state goes in as the text LoaderState::to_json wrote (checked to be one JSON object):
  // its carry can hold a whole tokenized document (a .txt file is one document), and a parse and
  // re-dump here would cost more than the rest of the save.
  const size_t b = s.loader_state_json.find_first_not_of(" \t\r\n");
  const size_t e = s.loader_state_json.find_last_not_of(" \t\r\n");
  const bool object = b != std::string::npos && s.loader_state_json[b] == '{' && s.loader_state_json[e] == '}';
  TITAN_CHECK(s.loader_state_json.empty() || object, "[checkpoint] the loader state is not a JSON object: '",
              s.loader_state_json.substr(0, 40), "'. HINT: pass LoaderState::to_json()");
  std::string text = j.dump();
  text.pop_back();  // the closing brace
  text += ",\"loader\":";
  text += s.loader_state_json.empty() ? std::string("null") : s.loader_state_json.substr(b, e - b + 1);
  text += "}\n";
  return text;
}

void write_files(const std::string& dir, const TrainState& s) {
  write_safetensors((fs::path(dir) / kModelFile).string(), s.model,
                    {{"format", "pt"}, {"titan", "train_state model"}});
  if (!s.model_only()) {
    write_safetensors((fs::path(dir) / kOptimizerFile).string(), s.optimizer,
                      {{"titan", "train_state optimizer (AdamW exp_avg, exp_avg_sq)"}});
  }
  write_text_file_atomic((fs::path(dir) / kStateFile).string(), state_json_text(s, s.model_only()));
  write_text_file_atomic((fs::path(dir) / kConfigFile).string(), s.config_toml);

  // The manifest goes last: its presence with matching digests is what makes the folder valid.
  ordered_json files = ordered_json::array();
  std::vector<std::string> names = {kModelFile};
  if (!s.model_only()) names.push_back(kOptimizerFile);
  names.push_back(kStateFile);
  names.push_back(kConfigFile);
  for (const std::string& name : names) {
    const FileDigest d = digest_file((fs::path(dir) / name).string());
    files.push_back({{"name", name}, {"size", d.size}, {"crc32c", d.crc}});
  }
  ordered_json tensors = {{"model", tensors_json(s.model, kModelFile)}};
  if (!s.model_only()) tensors["optimizer"] = tensors_json(s.optimizer, kOptimizerFile);
  const ordered_json manifest = {{"format", kFormat}, {"version", kTrainStateVersion}, {"step", s.step},
                                 {"model_only", s.model_only()}, {"files", files}, {"tensors", tensors}};
  write_text_file_atomic((fs::path(dir) / kManifestFile).string(), manifest.dump(1) + "\n");
  fsync_dir(dir);
}

// Moves `tmp` to `final_dir`. When final_dir exists (a step saved again, e.g. after resuming
// from an older step), the two are exchanged atomically and the old content removed.
void install_dir(const std::string& tmp, const std::string& final_dir, const std::string& replaced) {
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_NOREPLACE) == 0) return;
  int err = errno;
  if (err == EEXIST || err == ENOTEMPTY) {
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) == 0) {
      fs::remove_all(tmp);  // now holds the old content; a kill here leaves a stale tmp, removed later
      return;
    }
    err = errno;
  }
  if (err == EINVAL || err == ENOSYS) {
    // No renameat2 flags on this filesystem: move the old one aside (whole, so restored by
    // remove_stale_checkpoint_dirs if we die before the new one is in place), then rename.
    if (fs::exists(final_dir)) {
      TITAN_CHECK(::rename(final_dir.c_str(), replaced.c_str()) == 0, "[checkpoint] cannot move ", final_dir,
                  " aside to ", replaced, ": ", std::strerror(errno));
    }
    TITAN_CHECK(::rename(tmp.c_str(), final_dir.c_str()) == 0, "[checkpoint] renaming ", tmp, " to ", final_dir,
                " failed: ", std::strerror(errno));
    std::error_code ec;
    fs::remove_all(replaced, ec);
    return;
  }
  TITAN_FAIL("[checkpoint] renaming ", tmp, " to ", final_dir, " failed: ", std::strerror(err));
}

// keep_latest_k counts resumable checkpoints: the newest k full step folders stay, and always
// `keep`. Model-only folders (a finished run's final save) are never pruned and do not count, so
// a final save cannot delete the checkpoint a longer rerun continues from.
void prune(const std::string& folder, int64_t keep_latest_k, int64_t keep) {
  const std::vector<CheckpointEntry> all = list_checkpoints(folder);  // newest first
  bool removed = false;
  int64_t full_kept = 0;
  for (const CheckpointEntry& e : all) {
    bool model_only = false;
    try {
      model_only = checkpoint_is_model_only(e.path);
    } catch (const Error&) {  // an unreadable manifest counts as a full checkpoint, pruned in turn
    }
    if (model_only) continue;
    if (full_kept < keep_latest_k || e.step == keep) {
      ++full_kept;
      continue;
    }
    // Renamed first: a kill mid-removal leaves a hidden trash folder, never a half step-<N>; the
    // next start finishes the delete (remove_stale_checkpoint_dirs never restores trash).
    const std::string trash =
        (fs::path(folder) / str(".", step_dir_name(e.step), ".trash-", ::getpid())).string();
    if (::rename(e.path.c_str(), trash.c_str()) != 0) {
      log_warn(str("[checkpoint] keep_latest_k: cannot remove ", e.path, ": ", std::strerror(errno)));
      continue;
    }
    std::error_code ec;
    fs::remove_all(trash, ec);
    removed = true;
  }
  if (removed) fsync_dir(folder);
}

}  // namespace titan::ckpt::detail
