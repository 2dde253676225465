#include "titan/checkpoint/train_state.h"

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
#include "titan/core/abbreviate.h"
#include "titan/core/crc32c.h"
#include "titan/core/error.h"
#include "titan/core/log.h"
#include "titan/core/slices.h"
#include "titan/checkpoint/train_state_files.h"

namespace titan::ckpt {

using namespace detail;

namespace {

namespace fs = std::filesystem;

const nlohmann::json& field(const nlohmann::json& j, const char* key, const std::string& where) {
  TITAN_CHECK(j.is_object() && j.contains(key), "[checkpoint] ", where, ": field \"", key,
              "\" is missing. HINT: the file is damaged or not a titan checkpoint");
  return j.at(key);
}

int64_t int_field(const nlohmann::json& j, const char* key, const std::string& where) {
  const nlohmann::json& v = field(j, key, where);
  TITAN_CHECK(v.is_number_integer(), "[checkpoint] ", where, ": field \"", key, "\" is ", v.dump(),
              ", expected an integer");
  return v.get<int64_t>();
}

std::string string_field(const nlohmann::json& j, const char* key, const std::string& where) {
  const nlohmann::json& v = field(j, key, where);
  TITAN_CHECK(v.is_string(), "[checkpoint] ", where, ": field \"", key, "\" is ", abbreviate(v.dump()),
              ", expected a string. HINT: the file is damaged or not a titan checkpoint");
  return v.get<std::string>();
}

// A shape: an array of sizes >= 0.
Shape shape_field(const nlohmann::json& j, const char* key, const std::string& where) {
  const nlohmann::json& v = field(j, key, where);
  bool ok = v.is_array();
  for (const nlohmann::json& d : ok ? v : nlohmann::json::array()) ok = ok && d.is_number_integer() && d.get<int64_t>() >= 0;
  TITAN_CHECK(ok, "[checkpoint] ", where, ": field \"", key, "\" is ", abbreviate(v.dump()),
              ", expected a shape (an array of sizes). HINT: the file is damaged or not a titan checkpoint");
  return v.get<Shape>();
}

// Copies `src` (1-D f32) to flat elements [start, start + n) of `whole` (f32, contiguous), or of its
// tensor-parallel slice when tp_dim >= 0: the slice's rows along tp_dim are `rows` of `whole` (not
// contiguous in `whole`: runs of the dims after tp_dim are).
void copy_piece(Tensor& whole, int tp_dim, const std::vector<int64_t>& rows, int64_t start, const Tensor& src) {
  float* dst = whole.data<float>();
  const float* s = src.data<float>();
  const int64_t n = src.numel();
  if (tp_dim < 0) {
    std::memcpy(dst + start, s, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  const Shape& shape = whole.shape();
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(tp_dim) + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t size = shape[static_cast<size_t>(tp_dim)], local = static_cast<int64_t>(rows.size());
  for (int64_t k = start; k < start + n;) {
    const int64_t o = k / (local * inner), j = (k / inner) % local, i = k % inner;
    const int64_t run = std::min(inner - i, start + n - k);
    std::memcpy(dst + (o * size + rows[static_cast<size_t>(j)]) * inner + i, s + (k - start),
                static_cast<size_t>(run) * sizeof(float));
    k += run;
  }
}

// One group's tensors, whole: a tensor saved whole is a zero-copy view of its mapped file; one saved
// in flat pieces (a sharded save) is assembled into a new f32 tensor, its pieces checked to cover
// it exactly. Every file's tensors must all be in the manifest.
NamedTensors read_group(const std::string& dir, const nlohmann::json& manifest, const char* group) {
  const std::string where = (fs::path(dir) / kManifestFile).string();
  const nlohmann::json& entries = field(field(manifest, "tensors", where), group, where);
  TITAN_CHECK(entries.is_object(), "[checkpoint] ", where, ": tensors.", group, " is not an object");
  std::map<std::string, SafetensorsFile> files;
  std::map<std::string, size_t> keys_used;
  const auto file = [&](const nlohmann::json& shard, const std::string& name) -> const SafetensorsFile& {
    const std::string f = string_field(shard, "file", where + " " + name);
    TITAN_CHECK(f.find('/') == std::string::npos && f != "..", "[checkpoint] ", where, ": bad file name ", f);
    auto it = files.find(f);
    if (it == files.end()) it = files.emplace(f, SafetensorsFile::open((fs::path(dir) / f).string())).first;
    ++keys_used[f];
    return it->second;
  };
  NamedTensors out;
  for (const auto& [name, e] : entries.items()) {
    const nlohmann::json& shards = field(e, "shards", where + " " + name);
    TITAN_CHECK(shards.is_array() && !shards.empty(), "[checkpoint] ", where, ": ", name, " has no shards");
    const Shape shape = shape_field(e, "shape", where + " " + name);
    const std::string dtype = string_field(e, "dtype", where + " " + name);
    if (shards.size() == 1 && shards[0].contains("dim") && shards[0]["dim"].is_null()) {
      const SafetensorsFile& f = file(shards[0], name);
      const std::string key = string_field(shards[0], "key", where + " " + name);
      const Tensor t = f.get(key);
      TITAN_CHECK(t.shape() == shape && safetensors_dtype_name(t.dtype()) == dtype, "[checkpoint] ", name, ": ",
                  f.path(), " holds ", safetensors_dtype_name(t.dtype()), shape_str(t.shape()), " but ", where,
                  " says ", dtype, shape_str(shape));
      out.emplace_back(name, t);
      continue;
    }
    Tensor whole = Tensor::zeros(shape);
    // Pieces grouped by tensor-parallel slice; each slice's flat ranges must tile it exactly.
    std::map<std::tuple<int, int64_t, int64_t, std::vector<int64_t>>, std::vector<std::pair<int64_t, int64_t>>> slices;
    for (const nlohmann::json& shard : shards) {
      TITAN_CHECK(shard.value("dim", nlohmann::json()) == "flat", "[checkpoint] ", where, ": ", name, " has shard ",
                  shard.dump(), "; this build reads whole tensors and flat pieces");
      const int64_t start = int_field(shard, "start", where + " " + name);
      const int64_t length = int_field(shard, "length", where + " " + name);
      int tp_dim = -1;
      int64_t tp_rank = 0, tp_degree = 1;
      std::vector<int64_t> sections, rows;
      if (shard.contains("tp")) {
        const nlohmann::json& tp = shard["tp"];
        tp_dim = static_cast<int>(int_field(tp, "dim", where + " " + name));
        tp_rank = int_field(tp, "rank", where + " " + name);
        tp_degree = int_field(tp, "degree", where + " " + name);
        if (tp.contains("sections")) {
          TITAN_CHECK(tp["sections"].is_array(), "[checkpoint] ", where, ": ", name, " has tp sections ",
                      tp["sections"].dump(), ", expected an array of sizes");
          for (const nlohmann::json& v : tp["sections"]) sections.push_back(v.is_number_integer() ? v.get<int64_t>() : 0);
        }
        const bool fits = tp_dim >= 0 && tp_dim < static_cast<int>(shape.size()) && tp_rank >= 0 &&
                          tp_rank < tp_degree && sections_divide(shape[static_cast<size_t>(tp_dim)], sections, tp_degree);
        TITAN_CHECK(fits, "[checkpoint] ", where, ": ", name, " has a bad tensor-parallel slice ",
                    tp.dump());
        rows = slice_indices(shape[static_cast<size_t>(tp_dim)], sections, tp_rank, tp_degree);
      }
      const SafetensorsFile& f = file(shard, name);
      const Tensor t = f.get(string_field(shard, "key", where + " " + name));
      const int64_t slice_numel = whole.numel() / tp_degree;
      TITAN_CHECK(start >= 0 && length >= 0 && start + length <= slice_numel && t.numel() == length, "[checkpoint] ",
                  name, ": the piece [", start, ", +", length, ") in ", f.path(), " (", t.describe(),
                  ") does not fit its tensor ", shape_str(shape));
      copy_piece(whole, tp_dim, rows, start, t.reshape({length}).to(DType::f32));
      slices[{tp_dim, tp_rank, tp_degree, sections}].emplace_back(start, length);
    }
    const std::string damaged = ". HINT: the checkpoint is damaged; use an older step (checkpoint.load_step)";
    const auto& [first_dim, first_rank, degree, first_sections] = slices.begin()->first;
    TITAN_CHECK(static_cast<int64_t>(slices.size()) == degree, "[checkpoint] ", where, ": ", name, " has pieces of ",
                slices.size(), " tensor-parallel slices, expected ", degree, damaged);
    int64_t next_rank = 0;
    for (auto& [key, ranges] : slices) {
      TITAN_CHECK(std::get<0>(key) == first_dim && std::get<2>(key) == degree && std::get<3>(key) == first_sections &&
                      std::get<1>(key) == next_rank++,
                  "[checkpoint] ", where, ": ", name, " mixes tensor-parallel layouts", damaged);
      std::sort(ranges.begin(), ranges.end());
      int64_t covered = 0;
      for (const auto& [start, length] : ranges) {
        TITAN_CHECK(start == covered, "[checkpoint] ", where, ": the pieces of ", name,
                    start > covered ? " leave a gap" : " overlap", " at element ", covered, damaged);
        covered += length;
      }
      TITAN_CHECK(covered == whole.numel() / degree, "[checkpoint] ", where, ": the pieces of ", name, " cover ",
                  covered, " of ", whole.numel() / degree, " elements", damaged);
    }
    (void)first_rank;
    out.emplace_back(name, whole);
  }
  for (const auto& [name, f] : files) {
    TITAN_CHECK(keys_used[name] == f.tensors().size(), "[checkpoint] ", where, ": lists ", keys_used[name], " ",
                group, " tensors in ", f.path(), " but the file holds ", f.tensors().size(),
                ". HINT: the checkpoint is damaged; use an older step (checkpoint.load_step)");
  }
  return out;
}

}  // namespace

std::string step_dir_name(int64_t step) { return str("step-", step); }

std::vector<CheckpointEntry> list_checkpoints(const std::string& folder) {
  std::vector<CheckpointEntry> out;
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return out;
  for (const fs::directory_entry& e : fs::directory_iterator(folder, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step-", 0) != 0) continue;
    const int64_t step = parse_count(name.substr(5));
    if (step < 0 || !e.is_directory(ec)) continue;
    out.push_back({step, e.path().string()});
  }
  std::sort(out.begin(), out.end(), [](const CheckpointEntry& a, const CheckpointEntry& b) { return a.step > b.step; });
  return out;
}

std::string check_checkpoint(const std::string& dir) {
  const std::string manifest_path = (fs::path(dir) / kManifestFile).string();
  if (!fs::exists(manifest_path)) return str(kManifestFile, " is missing (the save did not finish)");
  nlohmann::json m;
  try {
    m = read_json_file(manifest_path);
  } catch (const Error& e) {
    return str(kManifestFile, " does not parse: ", e.what());
  }
  if (!m.is_object() || m.value("format", std::string()) != kFormat) {
    return str(kManifestFile, ": \"format\" is not \"", kFormat, "\"");
  }
  if (!m.contains("version") || m["version"] != kTrainStateVersion) {
    return str(kManifestFile, ": version ", m.value("version", nlohmann::json()).dump(), ", this build reads ",
               kTrainStateVersion);
  }
  if (!m.contains("files") || !m["files"].is_array()) return str(kManifestFile, ": \"files\" is not a list");
  std::set<std::string> listed;
  for (const nlohmann::json& f : m["files"]) {
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string() || !f.contains("size") ||
        !f["size"].is_number_unsigned() || !f.contains("crc32c") || !f["crc32c"].is_number_unsigned()) {
      return str(kManifestFile, ": bad file entry ", f.dump());
    }
    const std::string name = f["name"].get<std::string>();
    if (name.find('/') != std::string::npos || name == "..") return str(kManifestFile, ": bad file name ", name);
    listed.insert(name);
    const std::string path = (fs::path(dir) / name).string();
    std::error_code ec;
    const uint64_t size = fs::file_size(path, ec);
    if (ec) return str(name, " is missing (", ec.message(), ")");
    if (size != f["size"].get<uint64_t>()) {
      return str(name, ": ", size, " bytes, the manifest says ", f["size"].get<uint64_t>(), " (truncated?)");
    }
    FileDigest d;
    try {
      d = digest_file(path);
    } catch (const Error& e) {
      return e.what();
    }
    if (d.crc != f["crc32c"].get<uint32_t>()) {
      return str(name, ": crc32c ", hex32(d.crc), " != ", hex32(f["crc32c"].get<uint32_t>()),
                 " in the manifest (corrupted)");
    }
  }
  for (const char* need : {kStateFile, kConfigFile}) {
    if (!listed.count(need)) return str(kManifestFile, " does not list ", need);
  }
  // model.safetensors, or a sharded save's model-rank<r>-of-<w>.safetensors (likewise optimizer).
  const auto lists = [&](const std::string& prefix) {
    return std::any_of(listed.begin(), listed.end(), [&](const std::string& n) { return n.rfind(prefix, 0) == 0; });
  };
  if (!lists("model")) return str(kManifestFile, " does not list ", kModelFile);
  if (!m.value("model_only", true) && !lists("optimizer")) {
    return str(kManifestFile, " does not list ", kOptimizerFile, " but model_only is false");
  }
  return "";
}

bool checkpoint_is_model_only(const std::string& dir) {
  const nlohmann::json m = read_json_file((fs::path(dir) / kManifestFile).string());
  const nlohmann::json& v = field(m, "model_only", dir);
  return v.is_boolean() && v.get<bool>();
}

std::optional<CheckpointEntry> find_checkpoint(const std::string& folder, int64_t load_step, bool need_optimizer) {
  const std::vector<CheckpointEntry> all = list_checkpoints(folder);
  if (all.empty()) {
    TITAN_CHECK(load_step < 0, "[checkpoint] checkpoint.load_step=", load_step, " but ", folder,
                " holds no step-<N> folder. HINT: set checkpoint.load_step -1, or checkpoint.folder");
    return std::nullopt;
  }
  std::string steps;
  for (const CheckpointEntry& e : all) steps += str(steps.empty() ? "" : ", ", e.step);
  if (load_step >= 0) {
    for (const CheckpointEntry& e : all) {
      if (e.step != load_step) continue;
      const std::string why = check_checkpoint(e.path);
      TITAN_CHECK(why.empty(), "[checkpoint] checkpoint.load_step=", load_step, ": ", e.path, " is invalid: ", why,
                  ". HINT: pick another step (there: ", steps, ")");
      TITAN_CHECK(!need_optimizer || !checkpoint_is_model_only(e.path), "[checkpoint] checkpoint.load_step=",
                  load_step, ": ", e.path, " is model-only (no optimizer state) and cannot continue training. "
                  "HINT: pick another step (there: ", steps, ")");
      return e;
    }
    TITAN_FAIL("[checkpoint] checkpoint.load_step=", load_step, ": no ", step_dir_name(load_step), " in ", folder,
               " (there: ", steps, "). HINT: pick one of those, or -1 for the newest valid one");
  }
  std::string reasons;
  for (const CheckpointEntry& e : all) {
    const std::string why = check_checkpoint(e.path);
    if (!why.empty()) {
      log_warn(str("[checkpoint] skipping ", e.path, ": ", why, "; trying the previous one"));
      reasons += str(reasons.empty() ? "" : "; ", step_dir_name(e.step), ": ", why);
      continue;
    }
    if (need_optimizer && checkpoint_is_model_only(e.path)) {
      log_info(str("[checkpoint] skipping ", e.path, ": model-only (no optimizer state to continue training)"));
      reasons += str(reasons.empty() ? "" : "; ", step_dir_name(e.step),
                     ": model-only (a final save with checkpoint.last_save_model_only)");
      continue;
    }
    return e;
  }
  TITAN_FAIL("[checkpoint] ", folder, " holds checkpoints (steps ", steps, ") but none can be resumed from (",
             reasons, "). HINT: move them away to start afresh, or point checkpoint.folder elsewhere");
}

TrainState load_train_state(const std::string& dir, bool model_only) {
  const std::string why = check_checkpoint(dir);
  TITAN_CHECK(why.empty(), "[checkpoint] ", dir, " is invalid: ", why,
              ". HINT: use another step (checkpoint.load_step) or a complete checkpoint folder");
  const nlohmann::json manifest = read_json_file((fs::path(dir) / kManifestFile).string());
  const std::string state_path = (fs::path(dir) / kStateFile).string();
  const nlohmann::json sj = read_json_file(state_path);
  TrainState s;
  s.step = int_field(sj, "step", state_path);
  s.tokens_seen = int_field(sj, "tokens_seen", state_path);
  s.optimizer_step = int_field(sj, "optimizer_step", state_path);
  const nlohmann::json& seed = field(sj, "seed", state_path);
  TITAN_CHECK(seed.is_number_unsigned() || seed.is_number_integer(), "[checkpoint] ", state_path,
              ": seed is ", seed.dump(), ", expected an integer");
  s.seed = seed.get<uint64_t>();
  const nlohmann::json& loader = field(sj, "loader", state_path);
  if (!loader.is_null()) s.loader_state_json = loader.dump();
  TITAN_CHECK(s.step == int_field(manifest, "step", dir), "[checkpoint] ", state_path, ": step ", s.step,
              " but the manifest says ", manifest["step"].dump());
  s.config_toml = read_file_bytes((fs::path(dir) / kConfigFile).string());
  s.model = read_group(dir, manifest, "model");
  if (!model_only && !manifest.value("model_only", true)) s.optimizer = read_group(dir, manifest, "optimizer");
  return s;
}

int remove_stale_checkpoint_dirs(const std::string& folder) {
  int removed = 0;
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return 0;
  std::vector<fs::path> entries;
  for (const fs::directory_entry& e : fs::directory_iterator(folder, ec)) entries.push_back(e.path());
  for (const fs::path& p : entries) {
    // ".step-<N>.tmp-<pid>" (a save in progress), ".step-<N>.replaced-<pid>" (a whole step moved
    // aside for its successor) or ".step-<N>.trash-<pid>" (a pruned step, perhaps half deleted)
    const std::string name = p.filename().string();
    if (name.rfind(".step-", 0) != 0) continue;
    const size_t dot = name.find('.', 1);
    if (dot == std::string::npos) continue;
    const std::string kind = name.substr(dot + 1, name.find('-', dot) - dot - 1);
    if (kind != "tmp" && kind != "trash" && kind != "replaced") continue;
    const long pid = static_cast<long>(parse_count(name.substr(name.find('-', dot) + 1)));
    if (pid < 0 || process_alive(pid)) continue;
    const fs::path final_dir = fs::path(folder) / name.substr(1, dot - 1);
    // Only a replaced step is whole; trash is never restored: a kill during pruning's remove_all
    // leaves some of its files gone, and a half-deleted checkpoint must not come back as step-<N>.
    if (kind == "replaced" && !fs::exists(final_dir)) {
      // A replaced step whose successor never got into place: put it back rather than lose it.
      if (::rename(p.c_str(), final_dir.c_str()) == 0) {
        log_warn(str("[checkpoint] restored ", final_dir.string(), " from ", p.string()));
        continue;
      }
    }
    fs::remove_all(p, ec);
    if (!ec) {
      log_info(str("[checkpoint] removed ", p.string(), ", left by a process that is gone"));
      ++removed;
    }
  }
  return removed;
}

std::string save_train_state(const std::string& folder, const TrainState& s, int64_t keep_latest_k) {
  TITAN_CHECK(s.step >= 0, "[checkpoint] step must be >= 0, got ", s.step);
  TITAN_CHECK(!s.model.empty(), "[checkpoint] nothing to save: the model has no tensors");
  std::error_code ec;
  fs::create_directories(folder, ec);
  TITAN_CHECK(!ec && fs::is_directory(folder), "[checkpoint] cannot create checkpoint folder ", folder, ": ",
              ec ? ec.message() : "a file is in the way", ". HINT: set checkpoint.folder to a writable folder");
  const std::string name = step_dir_name(s.step);
  const std::string tmp = (fs::path(folder) / str(".", name, ".tmp-", ::getpid())).string();
  const std::string replaced = (fs::path(folder) / str(".", name, ".replaced-", ::getpid())).string();
  const std::string final_dir = (fs::path(folder) / name).string();
  fs::remove_all(tmp, ec);
  fs::create_directory(tmp, ec);
  TITAN_CHECK(!ec, "[checkpoint] cannot create ", tmp, ": ", ec.message());
  try {
    write_files(tmp, s);
    install_dir(tmp, final_dir, replaced);
    fsync_dir(folder);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  if (keep_latest_k > 0) prune(folder, keep_latest_k, s.step);
  return final_dir;
}

CheckpointWriter::~CheckpointWriter() {
  try {
    wait();
  } catch (const std::exception& e) {
    log(LogLevel::error, str("[checkpoint] background save failed: ", e.what()));
  }
}

void CheckpointWriter::save(const std::string& folder, TrainState state, int64_t keep_latest_k) {
  if (!async_) {
    save_train_state(folder, state, keep_latest_k);
    return;
  }
  wait();
  thread_ = std::thread([this, folder, state = std::move(state), keep_latest_k]() {
    try {
      const auto t0 = std::chrono::steady_clock::now();
      const std::string path = save_train_state(folder, state, keep_latest_k);
      log_info(str("checkpoint ", path, " written in the background in ",
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), " s"));
    } catch (...) {
      error_ = std::current_exception();
    }
  });
}

void CheckpointWriter::wait() {
  if (thread_.joinable()) thread_.join();
  if (error_) {
    std::exception_ptr e = std::exchange(error_, nullptr);
    std::rethrow_exception(e);
  }
}

}  // namespace titan::ckpt
