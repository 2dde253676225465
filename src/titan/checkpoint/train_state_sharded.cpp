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
#include "titan/core/crc32c.h"
#include "titan/core/error.h"
#include "titan/core/log.h"
#include "titan/checkpoint/train_state_files.h"

// The multi-rank save (save_train_state_sharded): every rank writes its own files into one tmp
// folder; rank 0 writes the rest and the manifest of every rank's pieces, then installs it.
namespace titan::ckpt {

using namespace detail;

namespace fs = std::filesystem;

namespace {

// One rank's file of one group for a sharded save, and the manifest entries of its tensors.
void write_rank_group(const std::string& dir, const char* group, const NamedTensors& tensors,
                      const std::vector<TensorPiece>& pieces, const SaveGroup& g, ordered_json& mine) {
  if (tensors.empty()) return;
  TITAN_CHECK(pieces.empty() || pieces.size() == tensors.size(), "[checkpoint] ", group, ": ", pieces.size(),
              " pieces for ", tensors.size(), " tensors");
  char file[96];
  std::snprintf(file, sizeof file, "%s-rank%05d-of-%05d.safetensors", group, g.rank, g.world);
  write_safetensors((fs::path(dir) / file).string(), tensors, {{"titan", str("train_state ", group, " shard")}});
  const FileDigest d = digest_file((fs::path(dir) / file).string());
  mine["files"].push_back({{"name", file}, {"size", d.size}, {"crc32c", d.crc}});
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    ordered_json shard = {{"rank", g.rank}, {"world", g.world}};
    if (pieces.empty()) {
      shard["dim"] = nullptr;
    } else {
      shard["dim"] = "flat";
      shard["start"] = pieces[i].start;
      shard["length"] = t.numel();
      if (pieces[i].tp_dim >= 0) {
        shard["tp"] = {{"dim", pieces[i].tp_dim}, {"rank", pieces[i].tp_rank}, {"degree", pieces[i].tp_degree}};
        if (!pieces[i].tp_sections.empty()) shard["tp"]["sections"] = pieces[i].tp_sections;
      }
    }
    shard["file"] = file;
    shard["key"] = name;
    mine[group][name] = {{"dtype", safetensors_dtype_name(t.dtype())},
                         {"shape", shape_json(pieces.empty() ? t.shape() : pieces[i].shape)},
                         {"shards", ordered_json::array({shard})}};
  }
}

std::string error_of(const std::string& reply) { return reply.rfind("error:", 0) == 0 ? reply.substr(6) : ""; }

}  // namespace

std::string save_train_state_sharded(const std::string& folder, const TrainState& s, const SaveGroup& g,
                                     bool model_only, int64_t keep_latest_k) {
  const std::string name = step_dir_name(s.step);
  std::string reply;  // rank 0's "ok:<tmp folder>" or "error:<what>"
  if (g.rank == 0) {
    try {
      TITAN_CHECK(s.step >= 0, "[checkpoint] step must be >= 0, got ", s.step);
      std::error_code ec;
      fs::create_directories(folder, ec);
      TITAN_CHECK(!ec && fs::is_directory(folder), "[checkpoint] cannot create checkpoint folder ", folder, ": ",
                  ec ? ec.message() : "a file is in the way", ". HINT: set checkpoint.folder to a writable folder");
      const std::string tmp = (fs::path(folder) / str(".", name, ".tmp-", ::getpid())).string();
      fs::remove_all(tmp, ec);
      fs::create_directory(tmp, ec);
      TITAN_CHECK(!ec, "[checkpoint] cannot create ", tmp, ": ", ec.message());
      reply = "ok:" + tmp;
    } catch (const std::exception& e) {
      reply = str("error:", e.what());
    }
  }
  reply = g.broadcast(reply);
  TITAN_CHECK(error_of(reply).empty(), error_of(reply));
  const std::string tmp = reply.substr(3);

  ordered_json mine = {{"files", ordered_json::array()}, {"model", ordered_json::object()},
                       {"optimizer", ordered_json::object()}};
  std::string error;
  try {
    write_rank_group(tmp, "model", s.model, s.model_pieces, g, mine);
    if (!model_only) write_rank_group(tmp, "optimizer", s.optimizer, s.optimizer_pieces, g, mine);
  } catch (const std::exception& e) {
    error = str("rank ", g.rank, ": ", e.what());
  }
  const std::vector<std::string> all = g.all_gather(error.empty() ? mine.dump() : "error:" + error);

  std::string result;
  if (g.rank == 0) {
    try {
      ordered_json files = ordered_json::array();
      ordered_json tensors = {{"model", ordered_json::object()}};
      if (!model_only) tensors["optimizer"] = ordered_json::object();
      for (const std::string& text : all) {
        TITAN_CHECK(error_of(text).empty(), error_of(text));
        const ordered_json r = ordered_json::parse(text);
        for (const auto& f : r["files"]) files.push_back(f);
        for (const char* group : {"model", "optimizer"}) {
          if (!tensors.contains(group)) continue;
          for (const auto& [tname, e] : r[group].items()) {
            ordered_json& merged = tensors[group][tname];
            if (merged.is_null()) {
              merged = e;
              continue;
            }
            TITAN_CHECK(merged["shape"] == e["shape"] && merged["dtype"] == e["dtype"], "[checkpoint] ", tname,
                        ": ranks disagree on its shape (", merged["shape"].dump(), " vs ", e["shape"].dump(), ")");
            merged["shards"].push_back(e["shards"][0]);
          }
        }
      }
      TITAN_CHECK(!tensors["model"].empty(), "[checkpoint] nothing to save: the model has no tensors");
      write_text_file_atomic((fs::path(tmp) / kStateFile).string(), state_json_text(s, model_only));
      write_text_file_atomic((fs::path(tmp) / kConfigFile).string(), s.config_toml);
      for (const char* f : {kStateFile, kConfigFile}) {
        const FileDigest d = digest_file((fs::path(tmp) / f).string());
        files.push_back({{"name", f}, {"size", d.size}, {"crc32c", d.crc}});
      }
      const ordered_json manifest = {{"format", kFormat}, {"version", kTrainStateVersion}, {"step", s.step},
                                     {"model_only", model_only}, {"world", g.world}, {"files", files},
                                     {"tensors", tensors}};
      write_text_file_atomic((fs::path(tmp) / kManifestFile).string(), manifest.dump(1) + "\n");
      fsync_dir(tmp);
      const std::string final_dir = (fs::path(folder) / name).string();
      install_dir(tmp, final_dir, (fs::path(folder) / str(".", name, ".replaced-", ::getpid())).string());
      fsync_dir(folder);
      if (keep_latest_k > 0) prune(folder, keep_latest_k, s.step);
      result = "ok:" + final_dir;
    } catch (const std::exception& e) {
      std::error_code ec;
      fs::remove_all(tmp, ec);
      result = str("error:", e.what());
    }
  }
  result = g.broadcast(result);
  TITAN_CHECK(error_of(result).empty(), error_of(result));
  return result.substr(3);
}

}  // namespace titan::ckpt
