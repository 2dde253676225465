#include "titan/checkpoint/hf_folder.h"

#include <filesystem>

#include "titan/checkpoint/json_file.h"
#include "titan/core/error.h"
#include "titan/core/path_check.h"

namespace titan::ckpt {
namespace {

namespace fs = std::filesystem;
constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

// Shard names come from a downloaded file: they may name subfolders but must not leave DIR.
bool shard_name_ok(const std::string& name) {
  if (name.empty() || name.front() == '/') return false;
  size_t start = 0;
  while (start <= name.size()) {
    const size_t slash = std::min(name.find('/', start), name.size());
    if (name.compare(start, slash - start, "..") == 0 && slash - start == 2) return false;
    start = slash + 1;
  }
  return true;
}

}  // namespace

HfWeights HfWeights::open(const std::string& dir) {
  HfWeights w;
  w.dir_ = dir;
  std::error_code ec;
  TITAN_CHECK(fs::is_directory(dir, ec), "[hf_folder] ", dir, " is not a directory");
  const std::string single = (fs::path(dir) / kSingleFile).string();
  const std::string index = (fs::path(dir) / kIndexFile).string();

  if (fs::exists(single, ec)) {
    w.shards_.push_back(SafetensorsFile::open(single));
    for (const auto& t : w.shards_[0].tensors()) w.shard_of_[t.name] = 0;
    return w;
  }
  for (const std::string& f : {single, index}) {  // a link loop or a dangling link is not "no weights"
    const std::string problem = path_problem(f);
    TITAN_CHECK(problem.empty() || problem == "does not exist", "[hf_folder] ", f, " ", problem,
                ". HINT: point it at the real file");
  }
  TITAN_CHECK(fs::exists(index, ec), "[hf_folder] ", dir, ": no weights: neither ", kSingleFile,
              " nor ", kIndexFile, " exists. HINT: download the *.safetensors files too");

  const nlohmann::json j = read_json_file(index);
  TITAN_CHECK(j.is_object() && j.contains("weight_map"), "[hf_folder] ", index,
              ": missing \"weight_map\" (expected {\"weight_map\": {tensor: shard file}})");
  const nlohmann::json& map = j["weight_map"];
  TITAN_CHECK(map.is_object(), "[hf_folder] ", index, ": \"weight_map\" must be an object, got ",
              map.type_name());

  // Open each distinct shard once; remember which index entry first named it for errors.
  std::map<std::string, size_t> shard_index;  // shard file name -> index into shards_
  std::map<std::string, std::string> listed;   // tensor name -> shard file name
  for (const auto& [key, value] : map.items()) {
    TITAN_CHECK(value.is_string(), "[hf_folder] ", index, ": weight_map \"", key,
                "\" must be a shard file name string, got ", value.dump());
    const std::string shard = value.get<std::string>();
    TITAN_CHECK(shard_name_ok(shard), "[hf_folder] ", index, ": weight_map \"", key, "\" names shard \"",
                shard, "\", which is outside the folder (absolute or '..'); refusing to read it");
    listed[key] = shard;
    if (shard_index.count(shard)) continue;
    const std::string shard_path = (fs::path(dir) / shard).string();
    TITAN_CHECK(fs::is_regular_file(shard_path, ec), "[hf_folder] ", index, ": shard \"", shard,
                "\" (listed for \"", key, "\") not found at ", shard_path,
                ". HINT: the download is incomplete");
    shard_index[shard] = w.shards_.size();
    w.shards_.push_back(SafetensorsFile::open(shard_path));
  }

  // Where each tensor actually is, from the shard headers.
  for (size_t s = 0; s < w.shards_.size(); ++s) {
    for (const auto& t : w.shards_[s].tensors()) {
      auto [it, inserted] = w.shard_of_.emplace(t.name, s);
      TITAN_CHECK(inserted, "[hf_folder] ", dir, ": tensor \"", t.name, "\" is in two shards, ",
                  w.shards_[it->second].path(), " and ", w.shards_[s].path());
    }
  }
  for (const auto& [key, shard] : listed) {
    auto it = w.shard_of_.find(key);
    const bool in_listed_shard = it != w.shard_of_.end() && it->second == shard_index.at(shard);
    TITAN_CHECK(in_listed_shard, "[hf_folder] ", index, ": tensor \"", key, "\" is listed in shard \"",
                shard, "\" but absent from it",
                it == w.shard_of_.end() ? std::string() : " (found in " + w.shards_[it->second].path() + ")");
  }
  for (const auto& [name, s] : w.shard_of_) {
    TITAN_CHECK(listed.count(name), "[hf_folder] ", w.shards_[s].path(), ": tensor \"", name,
                "\" is not listed in ", index, ". HINT: the index and shards are from different saves");
  }
  return w;
}

std::vector<std::string> HfWeights::names() const {
  std::vector<std::string> out;
  out.reserve(shard_of_.size());
  for (const auto& [name, s] : shard_of_) out.push_back(name);
  return out;
}

const TensorInfo* HfWeights::find(const std::string& name) const {
  auto it = shard_of_.find(name);
  return it == shard_of_.end() ? nullptr : shards_[it->second].find(name);
}

const SafetensorsFile& HfWeights::shard_for(const std::string& name) const {
  auto it = shard_of_.find(name);
  TITAN_CHECK(it != shard_of_.end(), "[hf_folder] ", dir_, ": no tensor \"", name, "\" (the folder holds ",
              shard_of_.size(), " tensors)");
  return shards_[it->second];
}

Tensor HfWeights::get(const std::string& name) const { return shard_for(name).get(name); }

std::string HfWeights::file_of(const std::string& name) const { return shard_for(name).path(); }

void HfWeights::release(const std::string& name) const { shard_for(name).release(name); }

}  // namespace titan::ckpt
