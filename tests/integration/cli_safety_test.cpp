// What `titan train` may replace, write through and read, run as a user runs it: the folders it
// replaces at its end (lora.save_adapter, the HF export) only when they are its own earlier
// outputs or with the overwrite flag; no writes through links planted in the dump folder; one run
// per checkpoint folder; bounded job files; and config mistakes refused with exit code 2 before
// the banner, the user's strings echoed short.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "integration/cli_runner.h"

namespace titan {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::kShakespeare;
using testing::read_text;
using testing::run_titan;
constexpr auto npos = std::string::npos;

class CliSafety : public testing::ScratchRunTest {
 protected:
  CliSafety() : ScratchRunTest("safety_") {}
  CommandResult lora(const std::string& dump, const std::string& extra) const {
    return train(dump, "--lora.rank 2 " + extra);
  }
};

// lora.save_adapter onto a folder of the user's, the base model's folder, the dump folder (as "."
// and by its path), a folder holding the run, or a relative path out of the dump folder: refused
// with exit 2 before any work, nothing deleted.
TEST_F(CliSafety, SaveAdapterRefusesFoldersItDidNotWrite) {
  fs::create_directories(dir_ / "mine");
  std::ofstream(dir_ / "mine" / "notes.txt") << "my notes";
  CommandResult r = lora("run", "--lora.save_adapter " + (dir_ / "mine").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("lora.save_adapter " + (dir_ / "mine").string() +
                          " is not empty and is not a PEFT adapter folder; writing it would delete what is there. "
                          "HINT: choose an empty or new folder, or pass --lora.save_adapter_overwrite"),
            npos) << r.output;
  EXPECT_EQ(read_text(dir_ / "mine" / "notes.txt"), "my notes");
  EXPECT_FALSE(fs::exists(dir_ / "run" / "metrics.jsonl")) << "refused before any work";
  struct Case {
    std::string adapter, expect;
  };
  const std::vector<Case> cases = {
      {(dir_ / "tok").string(), "is model.hf_assets_path itself"},
      {".", "is job.dump_folder itself"},
      {(dir_ / "run").string(), "is job.dump_folder itself"},
      {dir_.string(), "lora.save_adapter " + dir_.string() + " holds "},
      {"../elsewhere", "lora.save_adapter='../elsewhere' is relative but leads out of job.dump_folder"}};
  for (const Case& c : cases) {
    fs::create_directories(dir_ / "run");
    std::ofstream(dir_ / "run" / "keep.txt") << "run file";
    r = lora("run", "--lora.save_adapter " + c.adapter);
    EXPECT_EQ(r.exit_code, 2) << c.adapter << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expect), npos) << c.adapter << "\n" << r.output;
    EXPECT_EQ(read_text(dir_ / "run" / "keep.txt"), "run file") << c.adapter;
    EXPECT_EQ(read_text(dir_ / "mine" / "notes.txt"), "my notes") << c.adapter;
  }
  EXPECT_TRUE(fs::exists(dir_ / "tok" / "tokenizer.json"));
  EXPECT_FALSE(fs::exists(dir_ / "elsewhere"));
}

// The run's own earlier adapter is replaced whole (the same command twice works), and
// --lora.save_adapter_overwrite replaces a folder of other files.
TEST_F(CliSafety, SaveAdapterReplacesItsOwnOutputOrWithTheOverwriteFlag) {
  CommandResult r = lora("run", "--lora.save_adapter adapter");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path adapter = dir_ / "run" / "adapter";
  ASSERT_TRUE(fs::exists(adapter / "adapter_model.safetensors"));
  std::ofstream(adapter / "adapter_config.json") << "{\"stale\": true}";
  std::ofstream(adapter / "README.md") << "a model card, as PEFT writes one";
  r = lora("run", "--lora.save_adapter adapter");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(read_text(adapter / "adapter_config.json"))["r"], 2);
  EXPECT_FALSE(fs::exists(adapter / "README.md")) << "replaced whole";

  fs::create_directories(dir_ / "mine");
  std::ofstream(dir_ / "mine" / "notes.txt") << "my notes";
  r = lora("run2", "--lora.save_adapter " + (dir_ / "mine").string() + " --lora.save_adapter_overwrite");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(dir_ / "mine" / "adapter_config.json"));
  EXPECT_FALSE(fs::exists(dir_ / "mine" / "notes.txt"));
}

// checkpoint.last_save_in_hf follows the same rule for <checkpoint folder>/hf.
TEST_F(CliSafety, HfExportRefusesAFolderItDidNotWrite) {
  const fs::path hf = dir_ / "run" / "checkpoint" / "hf";
  fs::create_directories(hf);
  std::ofstream(hf / "notes.txt") << "my notes";
  CommandResult r = train("run", "--checkpoint.last_save_in_hf");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(hf.string() + " is not empty and is not a Hugging Face model folder"), npos) << r.output;
  EXPECT_EQ(read_text(hf / "notes.txt"), "my notes");
  r = train("run", "--checkpoint.last_save_in_hf --checkpoint.last_save_in_hf_overwrite");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(hf / "config.json"));
  EXPECT_FALSE(fs::exists(hf / "notes.txt"));
}

// A .titan.lock that is a link is refused, not followed: the lock would truncate its target.
TEST_F(CliSafety, ALinkedLockFileIsRefused) {
  std::ofstream(dir_ / "victim.txt") << "keep";
  fs::create_directories(dir_ / "run");
  fs::create_symlink(dir_ / "victim.txt", dir_ / "run" / ".titan.lock");
  const CommandResult r = train("run", "");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find((dir_ / "run" / ".titan.lock").string() + " is a symbolic link"), npos) << r.output;
  EXPECT_EQ(read_text(dir_ / "victim.txt"), "keep");
}

// Two runs with different dump folders and one absolute checkpoint.folder would both write
// step-<N> there: the second is refused with exit 2, naming the holder (flock(1) holds the lock
// here, as a running titan train does, under the label a titan train writes).
TEST_F(CliSafety, ASharedCheckpointFolderIsRefused) {
  const fs::path shared = dir_ / "shared_checkpoints";
  fs::create_directories(shared);
  std::ofstream(shared / ".titan.lock") << "pid 4242 on otherhost\n";
  const std::string args = "train --config qwen3_debug --model.n_layers 1 --training.steps 1 --training.seq_len 32 "
                           "--training.local_batch_size 1 --model.hf_assets_path " + (dir_ / "tok").string() +
                           " --training.dataset_path " + kShakespeare.string() + " --checkpoint.enable "
                           "--checkpoint.interval 1 --checkpoint.folder " + shared.string() +
                           " --job.dump_folder " + (dir_ / "second").string();
  testing::run_command("flock " + (shared / ".titan.lock").string() + " sh -c '" + std::string(TITAN_BINARY) + " " +
                       args + " > " + (dir_ / "out.txt").string() + " 2>&1; echo $? > " +
                       (dir_ / "code.txt").string() + "'");
  EXPECT_EQ(read_text(dir_ / "code.txt"), "2\n") << read_text(dir_ / "out.txt");
  EXPECT_NE(read_text(dir_ / "out.txt").find("checkpoint.folder " + shared.string() +
                                             " is in use by another titan train (pid 4242 on otherhost)"),
            npos) << read_text(dir_ / "out.txt");
  EXPECT_FALSE(fs::exists(shared / "step-1"));
  // Once the holder is gone the folder is the run's: it saves there and labels the lock as its own.
  const CommandResult r = run_titan(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(shared / "step-1" / "manifest.json"));
  EXPECT_EQ(read_text(shared / ".titan.lock").rfind("pid ", 0), 0u) << read_text(shared / ".titan.lock");
  EXPECT_EQ(read_text(shared / ".titan.lock").find("4242"), npos) << read_text(shared / ".titan.lock");
}

// A job file that never ends (/dev/zero) or is far larger than any job file is refused before
// it is read (the run is capped at 4 GB of address space so that a regression fails, not swaps).
TEST_F(CliSafety, JobFilesAreBounded) {
#if defined(__SANITIZE_ADDRESS__)
  const std::string cap;  // AddressSanitizer reserves terabytes of shadow address space: no cap
#else
  const std::string cap = "ulimit -v 4000000; ";
#endif
  const std::string titan = cap + std::string(TITAN_BINARY) + " train --config qwen3_debug ";
  CommandResult r = testing::run_command(titan + "--job.config_file /dev/zero 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("job.config_file: '/dev/zero' is not a regular file"), npos) << r.output;
  {
    std::ofstream big(dir_ / "big.toml");
    for (int i = 0; i < 500000; ++i) big << "# a comment line\n";  // 8.5 MB
  }
  r = testing::run_command(titan + "--job.config_file " + (dir_ / "big.toml").string() + " 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("bytes, more than a job file's limit of 4194304 (4 MiB)"), npos) << r.output;
}

// An unknown model.name is a config mistake: exit 2 before the banner; a megabyte-long one is
// echoed as its first 80 characters and its length.
TEST_F(CliSafety, UnknownModelNameIsExit2BeforeTheBannerAndEchoedShort) {
  CommandResult r = run_titan("train --config qwen3_debug --model.name nosuch --job.dump_folder " +
                              (dir_ / "run").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("unknown model.name 'nosuch': no model family has a size of that name"), npos) << r.output;
  EXPECT_EQ(r.output.find("titan 0.1.0 |"), npos) << r.output;
  std::ofstream(dir_ / "long.toml") << "[model]\nname = \"" << std::string(1 << 20, 'x') << "\"\n";
  r = run_titan("train --config qwen3_debug --job.config_file " + (dir_ / "long.toml").string() +
                " --job.dump_folder " + (dir_ / "run").string());
  EXPECT_EQ(r.exit_code, 2) << r.output.substr(0, 2000);
  EXPECT_NE(r.output.find("unknown model.name '" + std::string(80, 'x') + "... (1048576 bytes)'"), npos)
      << r.output.substr(0, 2000);
  EXPECT_LT(r.output.size(), 2000u);
}

}  // namespace
}  // namespace titan
