// The third bad-input sweep's reproductions (issue 49), run as its reporter ran them: files nested
// past any parser's stack, FIFOs where files belong, outputs that would replace what titan did not
// write, a link planted where checkpoints go, a killed export's leftovers, and sizes from flags
// used before they were checked. Each must end in a one-line error (or be cleaned up), promptly,
// with every file that was there before still there.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "integration/cli_runner.h"

namespace titan {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::kShakespeare;
using testing::read_text;
using testing::run_titan;
constexpr auto npos = std::string::npos;

class CliReliability : public testing::ScratchRunTest {
 protected:
  CliReliability() : ScratchRunTest("reliability_") {}

  static fs::path source(const std::string& relative) { return fs::path(TITAN_SOURCE_DIR) / relative; }
  // A copy of an HF fixture folder the test may damage.
  fs::path model_copy(const std::string& name = "tied_mha") const {
    const fs::path to = dir_ / ("model_" + name);
    fs::copy(source("tests/fixtures/hf/" + name), to, fs::copy_options::recursive);
    return to;
  }
};

std::string nested(const std::string& open, const std::string& close, int depth, const std::string& inner) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += open;
  s += inner;
  for (int i = 0; i < depth; ++i) s += close;
  return s;
}

// Sweep items 1-3: 20,000 nested decoder Sequences, a 200,000-deep array in config.json, a TOML
// header of 100,000 parts crashed tokenize / forward / train (SIGSEGV). Now: named, exit 1 or 2.
TEST_F(CliReliability, DeeplyNestedFilesAreRefusedNotCrashes) {
  nlohmann::json tok = nlohmann::json::parse(read_text(dir_ / "tok" / "tokenizer.json"));
  std::string text = tok.dump();
  const std::string seq = nested("{\"type\":\"Sequence\",\"decoders\":[", "]}", 20000, "");
  text.replace(text.find("\"decoder\":") + 10, tok["decoder"].dump().size(), seq);
  std::ofstream(dir_ / "tok" / "tokenizer.json") << text;
  std::ofstream(dir_ / "in.jsonl") << "{\"text\": \"hello\"}\n";
  CommandResult r = run_titan("tokenize --tokenizer " + (dir_ / "tok").string() + " --input " +
                              (dir_ / "in.jsonl").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("tokenizer.json: nested more than 256 levels deep (arrays/objects) at line 1"), npos)
      << r.output.substr(0, 2000);

  const fs::path model = model_copy();
  nlohmann::json config = nlohmann::json::parse(read_text(model / "config.json"));
  std::string ctext = config.dump();
  ctext.insert(ctext.size() - 1, ",\"extra\":" + nested("[", "]", 200000, "1"));
  std::ofstream(model / "config.json") << ctext;
  r = run_titan("forward --model " + model.string() + " --tokens " + (model / "tokens.safetensors").string() +
                " --out " + (dir_ / "out.safetensors").string());
  EXPECT_EQ(r.exit_code, 1) << r.output.substr(0, 2000);
  EXPECT_NE(r.output.find("config.json: nested more than 256 levels deep"), npos) << r.output.substr(0, 2000);

  std::string header = "a";
  for (int i = 1; i < 100000; ++i) header += ".a";
  std::ofstream(dir_ / "job.toml") << "[training]\nsteps = 1\n[" << header << "]\n";
  r = train("run", "--job.config_file " + (dir_ / "job.toml").string());
  EXPECT_EQ(r.exit_code, 2) << r.output.substr(0, 2000);
  EXPECT_NE(r.output.find("job.toml:3: a table header or key of 100000 dotted parts (at most 64)"), npos)
      << r.output.substr(0, 2000);
}

// Sweep item 19: a FIFO as config.json, model.safetensors or the dataset blocked open() forever.
TEST_F(CliReliability, FifosWhereFilesBelongAreRefusedAtOnce) {
  for (const char* name : {"config.json", "model.safetensors"}) {
    const fs::path model = model_copy();
    fs::remove(model / name);
    ASSERT_EQ(::mkfifo((model / name).c_str(), 0644), 0);
    const CommandResult r = run_titan("forward --model " + model.string() + " --tokens " +
                                      (model / "tokens.safetensors").string() + " --out " +
                                      (dir_ / "out.safetensors").string());
    EXPECT_EQ(r.exit_code, 1) << name << "\n" << r.output;
    EXPECT_NE(r.output.find(std::string(name) + ": not a regular file (a FIFO"), npos) << name << "\n" << r.output;
    fs::remove_all(model);
  }
  ASSERT_EQ(::mkfifo((dir_ / "data.jsonl").c_str(), 0644), 0);
  const CommandResult r = train("run", "--training.dataset_path " + (dir_ / "data.jsonl").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("data.jsonl: not a regular file (a FIFO, device or socket)"), npos) << r.output;
}

// Sweep item 4: generate / forward --out onto the model they read exited 0 having replaced it.
// Now refused before any work; an output of titan's own is still replaced.
TEST_F(CliReliability, OutputsReplaceOnlyWhatTitanWrote) {
  const fs::path model = model_copy();
  const std::string weights = read_text(model / "model.safetensors");
  const std::string config = read_text(model / "config.json");
  const std::string tokens = " --tokens " + (model / "tokens.safetensors").string();
  CommandResult r = run_titan("generate --model " + model.string() + tokens + " --max-new-tokens 2 --out " +
                              (model / "model.safetensors").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--out " + (model / "model.safetensors").string() +
                          " is a file titan did not write (a model's or another program's)"),
            npos)
      << r.output;
  r = run_titan("forward --model " + model.string() + tokens + " --out " + (model / "config.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(read_text(model / "model.safetensors"), weights);
  EXPECT_EQ(read_text(model / "config.json"), config);

  const fs::path out = dir_ / "ids.safetensors";
  for (int i = 0; i < 2; ++i) {  // the second run replaces the first's output
    r = run_titan("generate --model " + model.string() + tokens + " --max-new-tokens 2 --out " + out.string());
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
  r = run_titan("forward --model " + model.string() + tokens + " --out " + out.string());  // another command's
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// Sweep item 5: train-tokenizer --out MODEL_DIR replaced the folder's tokenizer files, chat
// template included. A folder without a tokenizer gets one; its own earlier output is replaced.
TEST_F(CliReliability, TrainTokenizerKeepsFoldersItDidNotWrite) {
  const fs::path model = model_copy();
  std::ofstream(model / "tokenizer_config.json") << R"({"chat_template": "{{ messages }}", "eos_token": "<|im_end|>"})";
  const std::string before = read_text(model / "tokenizer_config.json");
  const std::string args = " --input " + kShakespeare.string() + " --vocab-size 300";
  CommandResult r = run_titan("train-tokenizer --out " + model.string() + args);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("titan train-tokenizer: --out " + model.string() +
                          " holds a tokenizer_config.json that titan train-tokenizer did not write"),
            npos)
      << r.output;
  EXPECT_EQ(read_text(model / "tokenizer_config.json"), before);
  EXPECT_FALSE(fs::exists(model / "tokenizer.json"));

  fs::remove(model / "tokenizer_config.json");  // a tokenizer.json alone is not titan's either
  std::ofstream(model / "tokenizer.json") << "{}";
  r = run_titan("train-tokenizer --out " + model.string() + args);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("holds a tokenizer.json that titan train-tokenizer did not write"), npos) << r.output;
  EXPECT_EQ(read_text(model / "tokenizer.json"), "{}");

  fs::remove(model / "tokenizer.json");  // a model folder without a tokenizer gets one, and a rerun replaces it
  for (int i = 0; i < 2; ++i) {
    r = run_titan("train-tokenizer --out " + model.string() + args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
}

// Sweep item 6: a `checkpoint` link planted in the dump folder had step folders, the lock and
// pruning land in its target.
TEST_F(CliReliability, CheckpointLinkInTheDumpFolderIsNotFollowed) {
  fs::create_directories(dir_ / "run");
  fs::create_directories(dir_ / "elsewhere");
  fs::create_directory_symlink(dir_ / "elsewhere", dir_ / "run" / "checkpoint");
  const CommandResult r = train("run", "--checkpoint.enable --checkpoint.interval 1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("checkpoint.folder: " + (dir_ / "run" / "checkpoint").string() +
                          " is a symbolic link inside job.dump_folder"),
            npos)
      << r.output;
  EXPECT_TRUE(fs::is_empty(dir_ / "elsewhere"));
}

// Sweep item 7: kill -9 during `titan convert --to OUT` left OUT.tmp.<pid> folders for good. The
// next export beside them removes those of dead processes; a live process's is left alone.
TEST_F(CliReliability, ExportRemovesTmpFoldersOfKilledExports) {
  const CommandResult trained = train("run", "--checkpoint.enable --checkpoint.interval 1");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const fs::path step = dir_ / "run" / "checkpoint" / "step-1";
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  const fs::path out = dir_ / "hf";
  const fs::path stale = dir_ / ("hf.tmp." + std::to_string(dead));
  const fs::path stale_old = dir_ / ("hf.tmp." + std::to_string(dead) + ".old");
  const fs::path live = dir_ / ("hf.tmp." + std::to_string(::getpid()));
  for (const fs::path& p : {stale, stale_old, live}) {
    fs::create_directories(p);
    std::ofstream(p / "model.safetensors") << "half";
  }
  const CommandResult r = run_titan("convert --from " + step.string() + " --to " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(out / "config.json"));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(fs::exists(stale_old));
  EXPECT_TRUE(fs::exists(live / "model.safetensors")) << "a live process's folder is not ours to remove";
}

// Sweep items 8, 11 and 20-21: sizes from flags used before they were checked (mpirun grew to
// 24 GB, plan and demo hung past 60 s, std::bad_alloc) and an overflowed figure ("kv cache: 1 rows
// of -9223372036854775806 slots"): each refused at once, naming the flag and the value.
TEST_F(CliReliability, HugeCountsFromFlagsAreRefusedAtOnce) {
  const fs::path model = model_copy();
  const std::string common = " --training.steps 1 --training.seq_len 32 --job.dump_folder " + (dir_ / "run").string() +
                             " --model.hf_assets_path " + (dir_ / "tok").string();
  struct Case {
    std::string command;
    int exit_code;
    std::string says;
  };
  const Case cases[] = {
      {"launch --nproc-per-node 1000000000 -- train --config qwen3_debug", 2,
       "--nproc-per-node 1000000000 is more than 64 ranks per CPU of this node"},
      {"plan --config qwen3_debug --world-size 2147483648", 2, "--world-size 2147483648 is more than"},
      {"plan --config qwen3_debug --world-size 2 --local-batch-size 1099511627776", 2,
       "training.local_batch_size=1099511627776 x seq_len="},
      {"plan --config qwen3_debug --world-size 2 --model.n_layers 1000000", 2,
       "model.n_layers=1000000 is more than 4096 layers"},
      {"demo --layers 1000000000", 2, "[memory] spec debug needs at least"},
      {"train --config qwen3_debug --training.global_batch_size 2000000000" + common, 2,
       "training.global_batch_size=2000000000 is more than 16777216 sequences"},
      {"generate --model " + model.string() + " --tokens " + (model / "tokens.safetensors").string() +
           " --max-new-tokens 9223372036854775807 --out " + (dir_ / "ids.safetensors").string(),
       1, "--max-new-tokens 9223372036854775807 exceed the model's context of 128"},
  };
  for (const Case& c : cases) {
    const CommandResult r = run_titan(c.command);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.command << "\n" << r.output;
    EXPECT_NE(r.output.find(c.says), npos) << c.command << "\n" << r.output;
  }
}

// Sweep items 9 and 10: a vocab id of 2^31 - 1 sized tables at ~64 GB, and a Replace chain that
// grows 10 characters to 10 GB ended in std::bad_alloc. Now: named, bounded errors.
TEST_F(CliReliability, TokenizerSizesAreBoundedAndNamed) {
  const nlohmann::json base = nlohmann::json::parse(read_text(dir_ / "tok" / "tokenizer.json"));
  std::ofstream(dir_ / "in.jsonl") << "{\"text\": \"aaaaaaaaaa\"}\n";
  const auto tokenize = [&](const nlohmann::json& spec) {
    std::ofstream(dir_ / "tok" / "tokenizer.json") << spec.dump();
    return run_titan("tokenize --tokenizer " + (dir_ / "tok").string() + " --input " + (dir_ / "in.jsonl").string());
  };
  nlohmann::json spec = base;
  spec["model"]["vocab"]["zzz"] = 2147483647;
  CommandResult r = tokenize(spec);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("model.vocab[\"zzz\"] must be an id in [0, 2^24)"), npos) << r.output;
  spec = base;
  spec["added_tokens"].push_back({{"id", 2147483646}, {"content", "<big>"}, {"single_word", false}, {"lstrip", false},
                                  {"rstrip", false}, {"normalized", false}, {"special", true}});
  r = tokenize(spec);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(".id must be an id in [0, 2^24)"), npos) << r.output;

  spec = base;
  nlohmann::json steps = nlohmann::json::array();
  for (int i = 0; i < 10; ++i) {
    steps.push_back({{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", "aaaaaaaaaa"}});
  }
  spec["normalizer"] = {{"type", "Sequence"}, {"normalizers", steps}};
  r = tokenize(spec);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("[tokenizer] normalizer: a Replace step turns 10 bytes of text into "), npos) << r.output;
}

// Sweep item 20: internal errors where a file's field or a dataset folder's entry was at fault.
TEST_F(CliReliability, DamagedManifestsAndLinkLoopsAreNamed) {
  const CommandResult trained = train("run", "--checkpoint.enable --checkpoint.interval 1");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const fs::path step = dir_ / "run" / "checkpoint" / "step-1";
  const std::string manifest = read_text(step / "manifest.json");
  const auto convert_with = [&](const std::string& field, const nlohmann::json& value) {
    nlohmann::json m = nlohmann::json::parse(manifest);
    for (auto& [name, entry] : m["tensors"]["model"].items()) {
      if (field == "shape") {
        entry["shape"] = value;
      } else {
        entry["shards"][0][field] = value;
      }
      break;
    }
    std::ofstream(step / "manifest.json") << m.dump();
    return run_titan("convert --from " + step.string() + " --to " + (dir_ / "hf").string());
  };
  CommandResult r = convert_with("file", 7);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("field \"file\" is 7, expected a string"), npos) << r.output;
  EXPECT_EQ(r.output.find("internal error"), npos) << r.output;
  r = convert_with("shape", nlohmann::json::array({"a"}));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("field \"shape\" is [\"a\"], expected a shape"), npos) << r.output;

  fs::create_directories(dir_ / "data");
  fs::copy_file(kShakespeare, dir_ / "data" / "a.txt");
  fs::create_symlink(dir_ / "data" / "loop.jsonl", dir_ / "data" / "loop.jsonl");
  r = train("run2", "--training.dataset_path " + (dir_ / "data").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find((dir_ / "data" / "loop.jsonl").string() + " is a symbolic link loop"), npos) << r.output;
  EXPECT_EQ(r.output.find("internal error"), npos) << r.output;
}

// Under load: libgomp's default spin (300,000 loops at every barrier) burned the CPU another
// process needed and titan fell to a fifth of its speed beside it. titan now runs with a spin of
// 1,000 unless the user chose (OMP_WAIT_POLICY, GOMP_SPINCOUNT); libgomp says what it runs with.
TEST_F(CliReliability, OpenmpThreadsSpinBrieflyUnlessTheUserChose) {
  const auto spin_count = [](const std::string& env) {
    const CommandResult r = testing::run_command("env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT " + env +
                                                 " OMP_DISPLAY_ENV=verbose " TITAN_BINARY " version 2>&1");
    const size_t at = r.output.rfind("GOMP_SPINCOUNT = '");  // the last report: the process that runs
    return at == npos ? std::string("none") : r.output.substr(at + 18, r.output.find('\'', at + 18) - at - 18);
  };
  EXPECT_EQ(spin_count(""), "1000");
  EXPECT_EQ(spin_count("GOMP_SPINCOUNT=5"), "5");
  EXPECT_EQ(spin_count("OMP_WAIT_POLICY=passive"), "0");
  const CommandResult r = testing::run_command("env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT " TITAN_BINARY
                                               " train --config qwen3_debug --model.n_layers 1 --training.steps 1 --training.seq_len 32 "
                                               "--training.local_batch_size 1 --job.dump_folder " +
                                               (dir_ / "run").string() + " --model.hf_assets_path " +
                                               (dir_ / "tok").string() + " 2>&1");
  EXPECT_NE(r.output.find("threads (" ), npos) << r.output;
  EXPECT_NE(r.output.find("; waits: spin 1000 then sleep)"), npos) << r.output;
}

// Sweep item 18: a SIGTERM during a long validation pass (the whole of a large set) was ignored
// until the pass ended, 10+ minutes; now the pass ends at its next batch and the run stops as at a
// step's end: exit 143, no validation line for the cut pass.
TEST_F(CliReliability, SigtermStopsALongValidationPass) {
  {
    std::ofstream big(dir_ / "val.txt");
    const std::string text = read_text(kShakespeare);
    for (int i = 0; i < 40; ++i) big << text;  // ~44 MB: many minutes for a whole-set pass here
  }
  const fs::path log = dir_ / "run.log";
  const pid_t pid = testing::spawn_titan(
      "train --config qwen3_debug --model.n_layers 1 --training.steps 3 --training.seq_len 32 "
      "--training.local_batch_size 1 --metrics.peak_tflops 1 --metrics.log_freq 1 --job.dump_folder " +
          (dir_ / "run").string() + " --model.hf_assets_path " + (dir_ / "tok").string() +
          " --training.dataset_path " + kShakespeare.string() + " --validation.enable --validation.freq 1 "
          "--validation.steps -1 --validation.dataset_path " + (dir_ / "val.txt").string(),
      log);
  ASSERT_GT(pid, 0);
  const fs::path metrics = dir_ / "run" / "metrics.jsonl";
  for (int i = 0; i < 600 && !fs::exists(metrics); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // inside the first validation pass
  const auto sent = std::chrono::steady_clock::now();
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  const std::string out = read_text(log);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), 143) << out;
  EXPECT_NE(out.find("titan: stopped by SIGTERM after step 1 of 3"), npos) << out;
  EXPECT_LT(seconds, 30.0) << "the pass should end at its next batch\n" << out;
  EXPECT_EQ(read_text(metrics).find("validation"), npos) << "no record of the cut pass";
}

}  // namespace
}  // namespace titan
