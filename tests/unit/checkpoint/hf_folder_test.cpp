// Hugging Face model folders: a single model.safetensors (the fixtures), a sharded folder with an
// index written here, and one test per way an index and its shards can disagree. Also
// read_json_file's errors.
#include "titan/checkpoint/hf_folder.h"

#include <gtest/gtest.h>

#include "ops/op_harness.h"
#include "titan/checkpoint/atomic_file.h"
#include "titan/checkpoint/json_file.h"
#include "unit/checkpoint/checkpoint_test_util.h"

namespace titan::ckpt {
namespace {

using testing::TempDir;
using testing::throws_error;
using testing::write_bytes;

constexpr const char* kIndex = "model.safetensors.index.json";

Tensor f32(std::vector<float> v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())});
  std::memcpy(t.raw_data(), v.data(), v.size() * 4);
  return t;
}

void write_shard(const TempDir& dir, const std::string& name, const std::vector<std::string>& keys) {
  std::filesystem::create_directories(std::filesystem::path(dir.file(name)).parent_path());
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (size_t i = 0; i < keys.size(); ++i) tensors.push_back({keys[i], f32({float(i), float(keys[i].size())})});
  write_safetensors(dir.file(name), tensors);
}

void write_index(const TempDir& dir, const nlohmann::json& weight_map) {
  const nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}};
  write_text_file_atomic(dir.file(kIndex), index.dump(2));
}

TEST(HfWeights, SingleFileFolder) {
  const std::string dir = titan::testing::source_path("tests/fixtures/hf/untied_gqa2");
  HfWeights w = HfWeights::open(dir);
  SafetensorsFile f = SafetensorsFile::open(dir + "/model.safetensors");
  std::vector<std::string> want;
  for (const auto& t : f.tensors()) want.push_back(t.name);
  EXPECT_EQ(w.names(), want);
  EXPECT_EQ(w.file_of("lm_head.weight"), dir + "/model.safetensors");
  EXPECT_EQ(w.find("lm_head.weight")->shape, f.find("lm_head.weight")->shape);
  const Tensor a = w.get("model.norm.weight"), b = f.get("model.norm.weight");
  EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0);
}

TEST(HfWeights, ShardedFolderWithSubdirectory) {
  TempDir dir;
  write_shard(dir, "model-00001-of-00002.safetensors", {"a.weight", "b.weight"});
  write_shard(dir, "sub/model-00002-of-00002.safetensors", {"c.weight"});
  write_index(dir, {{"a.weight", "model-00001-of-00002.safetensors"},
                    {"b.weight", "model-00001-of-00002.safetensors"},
                    {"c.weight", "sub/model-00002-of-00002.safetensors"}});
  HfWeights w = HfWeights::open(dir.path());
  EXPECT_EQ(w.names(), (std::vector<std::string>{"a.weight", "b.weight", "c.weight"}));
  EXPECT_EQ(w.file_of("b.weight"), dir.file("model-00001-of-00002.safetensors"));
  EXPECT_EQ(w.file_of("c.weight"), dir.file("sub/model-00002-of-00002.safetensors"));
  EXPECT_EQ(w.get("b.weight").data<float>()[0], 1.f);  // index 1 in its shard
  EXPECT_EQ(w.get("c.weight").data<float>()[1], 8.f);  // strlen("c.weight")
  EXPECT_EQ(w.find("d.weight"), nullptr);
  EXPECT_TRUE(throws_error([&] { w.get("d.weight"); }, {dir.path(), "no tensor \"d.weight\""}));
  EXPECT_TRUE(throws_error([&] { w.file_of("d.weight"); }, {dir.path(), "\"d.weight\""}));
}

TEST(HfWeights, SingleFileWinsOverIndexLikeTransformers) {
  TempDir dir;
  write_shard(dir, "model.safetensors", {"x"});
  write_bytes(dir.file(kIndex), "not even json");
  EXPECT_EQ(HfWeights::open(dir.path()).names(), std::vector<std::string>{"x"});
}

TEST(HfWeights, MissingFolderOrWeights) {
  TempDir dir;
  EXPECT_TRUE(throws_error([&] { HfWeights::open(dir.file("nope")); }, {dir.file("nope"), "not a directory"}));
  EXPECT_TRUE(throws_error([&] { HfWeights::open(dir.path()); },
                           {dir.path(), "model.safetensors nor model.safetensors.index.json"}));
  // A link loop where the weights should be says so, not "no weights".
  std::filesystem::create_symlink("model.safetensors.loop", dir.file("model.safetensors"));
  std::filesystem::create_symlink("model.safetensors", dir.file("model.safetensors.loop"));
  EXPECT_TRUE(throws_error([&] { HfWeights::open(dir.path()); }, {"model.safetensors is a symbolic link loop"}));
}

// Index and shard problems. Each case builds a folder, then open() must fail naming these parts.
struct BadFolder {
  const char* name;
  std::function<void(const TempDir&)> build;
  std::vector<std::string> parts;  // "{dir}" is replaced by the folder path
};

std::vector<BadFolder> bad_folders() {
  const std::string s1 = "model-00001-of-00002.safetensors", s2 = "model-00002-of-00002.safetensors";
  auto raw_index = [](std::string text) { return [text](const TempDir& d) { write_bytes(d.file(kIndex), text); }; };
  auto bad_shard_name = [s1](std::string name) {
    return [s1, name](const TempDir& d) {
      write_shard(d, s1, {"a"});
      write_index(d, {{"a", s1}, {"b", name}});
    };
  };
  return {
      {"index_invalid_json", raw_index("{\n  \"weight_map\": {\n    \"a\": x\n"), {"{dir}/" + std::string(kIndex), "line 3, column"}},
      {"index_not_object", raw_index("[]"), {"{dir}/" + std::string(kIndex), "missing \"weight_map\""}},
      {"index_no_weight_map", raw_index(R"({"metadata": {}})"), {"missing \"weight_map\""}},
      {"weight_map_not_object", raw_index(R"({"weight_map": ["a"]})"), {"\"weight_map\" must be an object, got array"}},
      {"weight_map_value_not_string", raw_index(R"({"weight_map": {"a": 1}})"), {"weight_map \"a\"", "shard file name"}},
      {"index_duplicate_key", raw_index(R"({"weight_map": {"a": "x", "a": "y"}})"), {"duplicate key \"a\""}},
      {"shard_dotdot", bad_shard_name("../model.safetensors"), {"weight_map \"b\"", "\"../model.safetensors\"", "outside the folder"}},
      {"shard_inner_dotdot", bad_shard_name("sub/../../x.safetensors"), {"weight_map \"b\"", "outside the folder"}},
      {"shard_absolute", bad_shard_name("/etc/passwd"), {"weight_map \"b\"", "\"/etc/passwd\"", "outside the folder"}},
      {"shard_empty", bad_shard_name(""), {"weight_map \"b\"", "outside the folder"}},
      {"shard_missing", bad_shard_name(s2), {"{dir}/" + std::string(kIndex), "shard \"" + s2 + "\"", "\"b\"", "not found"}},
      {"key_absent_from_shard",
       [=](const TempDir& d) {
         write_shard(d, s1, {"a"});
         write_index(d, {{"a", s1}, {"ghost", s1}});
       },
       {"{dir}/" + std::string(kIndex), "tensor \"ghost\" is listed in shard \"" + s1 + "\" but absent"}},
      {"key_in_other_shard",
       [=](const TempDir& d) {
         write_shard(d, s1, {"a", "c"});
         write_shard(d, s2, {"b"});
         write_index(d, {{"a", s2}, {"b", s2}, {"c", s1}});
       },
       {"tensor \"a\" is listed in shard \"" + s2 + "\" but absent", "(found in {dir}/" + s1 + ")"}},
      {"tensor_not_in_index",
       [=](const TempDir& d) {
         write_shard(d, s1, {"a", "stray"});
         write_index(d, {{"a", s1}});
       },
       {"{dir}/" + s1, "tensor \"stray\" is not listed in {dir}/" + std::string(kIndex)}},
      {"key_in_two_shards",
       [=](const TempDir& d) {
         write_shard(d, s1, {"a", "b"});
         write_shard(d, s2, {"b"});
         write_index(d, {{"a", s1}, {"b", s2}});
       },
       {"tensor \"b\" is in two shards", "{dir}/" + s1, "{dir}/" + s2}},
      {"shard_corrupt",
       [=](const TempDir& d) {
         write_bytes(d.file(s1), "xyz");
         write_index(d, {{"a", s1}});
       },
       {"{dir}/" + s1, "shorter than the 8-byte"}},
  };
}

class HfWeightsBadFolder : public ::testing::TestWithParam<BadFolder> {};

TEST_P(HfWeightsBadFolder, FailsAtOpenWithOneLineNamingFileAndKey) {
  TempDir dir;
  GetParam().build(dir);
  std::vector<std::string> parts;
  for (std::string p : GetParam().parts) {
    if (size_t at = p.find("{dir}"); at != std::string::npos) p.replace(at, 5, dir.path());
    parts.push_back(p);
  }
  EXPECT_TRUE(throws_error([&] { HfWeights::open(dir.path()); }, parts));
}

INSTANTIATE_TEST_SUITE_P(Index, HfWeightsBadFolder, ::testing::ValuesIn(bad_folders()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(ReadJsonFile, ErrorsNameTheFileAndPosition) {
  TempDir dir;
  EXPECT_TRUE(throws_error([&] { read_json_file(dir.file("config.json")); },
                           {dir.file("config.json"), "No such file or directory"}));
  EXPECT_TRUE(throws_error([&] { read_json_file(dir.path()); }, {dir.path(), "not a regular file"}));
  write_bytes(dir.file("bad.json"), "{\n  \"hidden_size\": 64,\n  \"vocab_size\": ,\n}");
  EXPECT_TRUE(throws_error([&] { read_json_file(dir.file("bad.json")); },
                           {dir.file("bad.json"), "invalid JSON", "line 3, column"}));
  // Found by tests/fuzz: a number beyond double is nlohmann's out_of_range, not parse_error; it
  // used to escape as a raw nlohmann exception instead of titan::Error.
  write_bytes(dir.file("big.json"), R"({"rope_theta": 1e999})");
  EXPECT_TRUE(throws_error([&] { read_json_file(dir.file("big.json")); },
                           {dir.file("big.json"), "invalid JSON", "number overflow parsing '1e999'"}));
  write_bytes(dir.file("dup.json"), R"({"a": {"b": 1, "b": 2}})");
  EXPECT_TRUE(throws_error([&] { read_json_file(dir.file("dup.json")); }, {dir.file("dup.json"), "duplicate key \"b\""}));
  // Equal keys in different objects are fine.
  write_bytes(dir.file("ok.json"), R"({"a": {"b": 1}, "c": {"b": 2}, "b": [{"b": 3}, {"b": 4}]})");
  EXPECT_EQ(read_json_file(dir.file("ok.json"))["b"][1]["b"], 4);
}

}  // namespace
}  // namespace titan::ckpt
