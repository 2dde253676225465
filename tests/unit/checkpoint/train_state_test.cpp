// Native training checkpoints (checkpoint/train_state.h): round trip, the manifest catching damage,
// fallback to the previous step, keep_latest_k, load_step, stale tmp folders, the async writer.
#include "titan/checkpoint/train_state.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "titan/core/error.h"
#include "titan/core/log.h"

namespace titan::ckpt {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("titan_train_state_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

Tensor filled(const Shape& shape, float base) {
  Tensor t = Tensor::empty(shape);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = base + 0.25f * static_cast<float>(i);
  return t;
}

TrainState make_state(int64_t step, bool model_only = false) {
  TrainState s;
  s.step = step;
  s.tokens_seen = step * 128;
  s.seed = 0xfedcba9876543210ull;  // above int64's range: must survive JSON as unsigned
  s.optimizer_step = step;
  s.loader_state_json = R"({"epoch":0,"doc_index":7,"carry":[1,2,3]})";
  s.config_toml = "[training]\nsteps = 10\n";
  s.model = {{"tok_embeddings.weight", filled({4, 3}, static_cast<float>(step))}, {"norm.weight", filled({3}, -1.0f)}};
  if (!model_only) {
    for (const auto& [name, t] : s.model) {
      s.optimizer.emplace_back(name + ".exp_avg", filled(t.shape(), 0.5f));
      s.optimizer.emplace_back(name + ".exp_avg_sq", filled(t.shape(), 2.0f));
    }
  }
  return s;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.contiguous().raw_data(), b.contiguous().raw_data(), a.nbytes()) == 0;
}

void flip_byte(const fs::path& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x10);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

class TrainStateTest : public ::testing::Test {
 protected:
  void SetUp() override { set_log_level(LogLevel::error); }
  void TearDown() override { set_log_level(LogLevel::info); }
};

TEST_F(TrainStateTest, RoundTripIsExact) {
  const fs::path dir = scratch("roundtrip");
  const TrainState s = make_state(3);
  const std::string path = save_train_state(dir.string(), s);
  EXPECT_EQ(path, (dir / "step-3").string());
  for (const char* f : {"model.safetensors", "optimizer.safetensors", "state.json", "config.toml", "manifest.json"}) {
    EXPECT_TRUE(fs::exists(dir / "step-3" / f)) << f;
  }
  EXPECT_EQ(check_checkpoint(path), "");
  const TrainState r = load_train_state(path);
  EXPECT_EQ(r.step, 3);
  EXPECT_EQ(r.tokens_seen, 384);
  EXPECT_EQ(r.seed, s.seed);
  EXPECT_EQ(r.optimizer_step, 3);
  EXPECT_EQ(r.config_toml, s.config_toml);
  EXPECT_EQ(nlohmann::json::parse(r.loader_state_json), nlohmann::json::parse(s.loader_state_json));
  ASSERT_EQ(r.model.size(), 2u);
  ASSERT_EQ(r.optimizer.size(), 4u);
  for (const NamedTensors* group : {&s.model, &s.optimizer}) {
    const NamedTensors& got = group == &s.model ? r.model : r.optimizer;
    for (const auto& [name, t] : *group) {
      bool found = false;
      for (const auto& [gname, gt] : got) {
        if (gname != name) continue;
        found = true;
        EXPECT_TRUE(same_bits(t, gt)) << name;
      }
      EXPECT_TRUE(found) << name;
    }
  }
  // The manifest describes every tensor's global shape, dtype and (whole) sharding.
  std::ifstream in(dir / "step-3" / "manifest.json");
  const nlohmann::json m = nlohmann::json::parse(in);
  const nlohmann::json& e = m["tensors"]["model"]["tok_embeddings.weight"];
  EXPECT_EQ(e["shape"], nlohmann::json({4, 3}));
  EXPECT_EQ(e["dtype"], "F32");
  EXPECT_EQ(e["shards"][0]["world"], 1);
  EXPECT_TRUE(e["shards"][0]["dim"].is_null());
  EXPECT_EQ(m["files"].size(), 4u);
  // No tmp folder is left behind.
  for (const auto& entry : fs::directory_iterator(dir)) EXPECT_EQ(entry.path().filename(), "step-3");
  fs::remove_all(dir);
}

TEST_F(TrainStateTest, ModelOnlySaveHasNoOptimizer) {
  const fs::path dir = scratch("model_only");
  const std::string path = save_train_state(dir.string(), make_state(5, true));
  EXPECT_FALSE(fs::exists(fs::path(path) / "optimizer.safetensors"));
  EXPECT_TRUE(checkpoint_is_model_only(path));
  const TrainState r = load_train_state(path);
  EXPECT_TRUE(r.model_only());
  EXPECT_EQ(r.model.size(), 2u);
  fs::remove_all(dir);
}

TEST_F(TrainStateTest, ManifestCatchesDamage) {
  const fs::path dir = scratch("damage");
  struct Case {
    std::string name, expect;
    void (*damage)(const fs::path&);
  };
  const std::vector<Case> cases = {
      {"flipped byte", "crc32c", [](const fs::path& d) { flip_byte(d / "optimizer.safetensors", 200); }},
      {"flipped byte in state", "state.json: crc32c", [](const fs::path& d) { flip_byte(d / "state.json", 5); }},
      {"truncated", "truncated",
       [](const fs::path& d) { fs::resize_file(d / "model.safetensors", fs::file_size(d / "model.safetensors") - 4); }},
      {"missing file", "config.toml is missing", [](const fs::path& d) { fs::remove(d / "config.toml"); }},
      {"no manifest", "manifest.json is missing", [](const fs::path& d) { fs::remove(d / "manifest.json"); }},
      {"bad manifest", "does not parse",
       [](const fs::path& d) { fs::resize_file(d / "manifest.json", fs::file_size(d / "manifest.json") / 2); }},
  };
  for (const Case& c : cases) {
    const std::string path = save_train_state(dir.string(), make_state(1));
    ASSERT_EQ(check_checkpoint(path), "");
    c.damage(path);
    const std::string why = check_checkpoint(path);
    EXPECT_NE(why.find(c.expect), std::string::npos) << c.name << ": " << why;
    try {
      load_train_state(path);
      ADD_FAILURE() << c.name << ": load_train_state accepted a damaged checkpoint";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
    fs::remove_all(path);
  }
  fs::remove_all(dir);
}

TEST_F(TrainStateTest, InvalidNewestFallsBackToThePrevious) {
  const fs::path dir = scratch("fallback");
  save_train_state(dir.string(), make_state(2));
  save_train_state(dir.string(), make_state(4));
  save_train_state(dir.string(), make_state(10));  // numeric order, not name order ("10" < "4")
  ASSERT_EQ(find_checkpoint(dir.string())->step, 10);
  flip_byte(dir / "step-10" / "model.safetensors", 100);
  fs::remove(dir / "step-4" / "manifest.json");  // a save that never finished
  const std::optional<CheckpointEntry> e = find_checkpoint(dir.string());
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->step, 2);
  EXPECT_EQ(e->path, (dir / "step-2").string());
  // Nothing valid at all: an error, not a silent fresh start beside the damaged folders.
  fs::remove(dir / "step-2" / "state.json");
  EXPECT_THROW(find_checkpoint(dir.string()), Error);
  // An empty or missing folder: nothing to resume.
  EXPECT_FALSE(find_checkpoint((dir / "nope").string()).has_value());
  fs::remove_all(dir);
}

TEST_F(TrainStateTest, ModelOnlyIsSkippedWhenTheOptimizerIsNeeded) {
  const fs::path dir = scratch("need_optimizer");
  save_train_state(dir.string(), make_state(3));
  save_train_state(dir.string(), make_state(6, true));
  EXPECT_EQ(find_checkpoint(dir.string())->step, 6);
  EXPECT_EQ(find_checkpoint(dir.string(), -1, true)->step, 3);
  EXPECT_THROW(find_checkpoint(dir.string(), 6, true), Error);
  fs::remove_all(dir);
}

TEST_F(TrainStateTest, LoadStepSelectsExactlyOrListsWhatExists) {
  const fs::path dir = scratch("load_step");
  for (int64_t s : {1, 2, 3}) save_train_state(dir.string(), make_state(s));
  EXPECT_EQ(find_checkpoint(dir.string(), 2)->step, 2);
  try {
    find_checkpoint(dir.string(), 7);
    ADD_FAILURE() << "load_step 7 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("there: 3, 2, 1"), std::string::npos) << e.what();
  }
  flip_byte(dir / "step-2" / "model.safetensors", 120);
  EXPECT_THROW(find_checkpoint(dir.string(), 2), Error);  // exact means exact: no fallback
  EXPECT_THROW(find_checkpoint((dir / "empty").string(), 2), Error);
  fs::remove_all(dir);
}

TEST_F(TrainStateTest, KeepLatestKPrunesOlderSteps) {
  const fs::path dir = scratch("keep");
  for (int64_t s = 1; s <= 5; ++s) save_train_state(dir.string(), make_state(s), 2);
  std::vector<int64_t> steps;
  for (const CheckpointEntry& e : list_checkpoints(dir.string())) steps.push_back(e.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{5, 4}));
  // Re-saving an older step (after resuming from it) keeps it even though newer ones exist.
  save_train_state(dir.string(), make_state(3), 1);
  steps.clear();
  for (const CheckpointEntry& e : list_checkpoints(dir.string())) steps.push_back(e.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{5, 3}));
  // Hidden entries only: no tmp or trash left.
  int hidden = 0;
  for (const auto& entry : fs::directory_iterator(dir)) hidden += entry.path().filename().string()[0] == '.';
  EXPECT_EQ(hidden, 0);
  fs::remove_all(dir);
}

TEST_F(TrainStateTest, ResavingAStepReplacesIt) {
  const fs::path dir = scratch("resave");
  save_train_state(dir.string(), make_state(4));
  TrainState s = make_state(4);
  s.tokens_seen = 999;
  save_train_state(dir.string(), s);
  EXPECT_EQ(load_train_state((dir / "step-4").string()).tokens_seen, 999);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  fs::remove_all(dir);
}

TEST_F(TrainStateTest, StaleTmpFoldersOfDeadProcessesAreRemoved) {
  const fs::path dir = scratch("stale");
  save_train_state(dir.string(), make_state(1));
  // A dead pid (pid_max is far below this), our own pid (an earlier process), and a live one (init).
  fs::create_directories(dir / ".step-2.tmp-999999999");
  fs::create_directories(dir / str(".step-3.tmp-", ::getpid()));
  fs::create_directories(dir / ".step-4.tmp-1");
  // A step moved aside whole (install_dir) whose step folder is gone is put back, not deleted.
  fs::rename(dir / "step-1", dir / ".step-1.replaced-999999999");
  EXPECT_EQ(remove_stale_checkpoint_dirs(dir.string()), 2);
  EXPECT_FALSE(fs::exists(dir / ".step-2.tmp-999999999"));
  EXPECT_FALSE(fs::exists(dir / str(".step-3.tmp-", ::getpid())));
  EXPECT_TRUE(fs::exists(dir / ".step-4.tmp-1"));
  EXPECT_EQ(check_checkpoint((dir / "step-1").string()), "");
  fs::remove_all(dir);
}

// keep_latest_k renames a pruned step to .step-<N>.trash-<pid> and then deletes it: a kill -9 in
// between leaves a trash folder that may be half deleted. The next start finishes the delete and
// never brings it back as step-<N>, even when its files look whole.
TEST_F(TrainStateTest, PrunedTrashOfADeadProcessIsDeletedNotRestored) {
  const fs::path dir = scratch("trash");
  save_train_state(dir.string(), make_state(1));
  save_train_state(dir.string(), make_state(2));
  // As prune leaves it, killed before remove_all took a file: whole, so restoring it would resume from it.
  fs::rename(dir / "step-2", dir / ".step-2.trash-999999999");
  EXPECT_EQ(remove_stale_checkpoint_dirs(dir.string()), 1);
  EXPECT_FALSE(fs::exists(dir / ".step-2.trash-999999999"));
  EXPECT_FALSE(fs::exists(dir / "step-2"));
  const std::optional<CheckpointEntry> resume = find_checkpoint(dir.string(), -1, false);
  ASSERT_TRUE(resume.has_value());
  EXPECT_EQ(resume->step, 1);
  fs::remove_all(dir);
}

TEST_F(TrainStateTest, ShardedManifestIsRefusedWithAHint) {
  const fs::path dir = scratch("sharded");
  const std::string path = save_train_state(dir.string(), make_state(1));
  // Rewrite the manifest as if norm.weight were split over 2 ranks (digests stay valid: the
  // manifest is not listed in itself).
  std::ifstream in(fs::path(path) / "manifest.json");
  nlohmann::ordered_json m = nlohmann::ordered_json::parse(in);
  in.close();
  m["tensors"]["model"]["norm.weight"]["shards"] = {{{"rank", 0}, {"world", 2}, {"dim", 0}, {"start", 0},
                                                     {"length", 2}, {"file", "model.safetensors"}}};
  std::ofstream(fs::path(path) / "manifest.json") << m.dump(1);
  try {
    load_train_state(path);
    ADD_FAILURE() << "sharded manifest accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sharded"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST_F(TrainStateTest, AsyncWriterSavesAndRethrowsErrors) {
  const fs::path dir = scratch("async");
  {
    CheckpointWriter w(true);
    for (int64_t s = 1; s <= 3; ++s) w.save(dir.string(), make_state(s), 0);
    w.wait();
  }
  EXPECT_EQ(list_checkpoints(dir.string()).size(), 3u);
  for (const CheckpointEntry& e : list_checkpoints(dir.string())) EXPECT_EQ(check_checkpoint(e.path), "");
  // A writer error surfaces on the caller's thread, at the next save or at wait().
  const fs::path blocked = dir / "a_file";
  std::ofstream(blocked) << "x";
  CheckpointWriter w(true);
  w.save(blocked.string(), make_state(1), 0);
  EXPECT_THROW(w.wait(), Error);
  w.save(blocked.string(), make_state(2), 0);
  EXPECT_THROW(w.save(dir.string(), make_state(3), 0), Error);
  w.wait();  // the error was delivered once
  fs::remove_all(dir);
}

}  // namespace
}  // namespace titan::ckpt
