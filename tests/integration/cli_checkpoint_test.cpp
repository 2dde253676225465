// Native checkpoints through `titan train` (the binary, as a user runs it): a resumed run continues
// the loss sequence to the bit, async saves equal synchronous ones, and runs killed at random
// moments (mid-step and mid-save) always leave a loadable checkpoint that the relaunch resumes from.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "integration/cli_runner.h"
#include "titan/checkpoint/train_state.h"
#include "titan/core/log.h"

extern char** environ;

namespace titan {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::run_titan;
using testing::kShakespeare;
using testing::read_jsonl;
using testing::read_text;
using testing::scratch_dir;
using testing::spawn_titan;

class CliCheckpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // One OpenMP thread per run: these runs are tiny, and on a busy machine (ctest -j, other jobs)
    // spinning OpenMP threads cost 10x. Comparisons hold at any fixed thread count.
    setenv("OMP_NUM_THREADS", "1", 1);
    dir_ = scratch_dir("checkpoint");
    ASSERT_TRUE(fs::exists(kShakespeare)) << kShakespeare;
    const CommandResult r = run_titan("train-tokenizer --input " + kShakespeare.string() + " --vocab-size 512 --out " +
                                      (dir_ / "tok").string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // The arguments of a tiny `titan train` into dir_/name (after "titan").
  static std::string train_args(const std::string& name, const std::string& extra) {
    return "train --config qwen3_debug --job.dump_folder " + (dir_ / name).string() + " --model.hf_assets_path " +
           (dir_ / "tok").string() + " --training.dataset_path " + kShakespeare.string() +
           " --metrics.peak_tflops 1 --checkpoint.enable " + extra;
  }
  static CommandResult train(const std::string& name, const std::string& extra) {
    return run_titan(train_args(name, extra));
  }

  // B: a fresh folder `b` holding only run `a`'s step-3, trained with a's six-step `extra`: it trains
  // steps 4..6 only, each equal to a's on `keys` to the bit, and ends with a's step-6 weights.
  // Returns B's run (its output for further checks).
  static CommandResult resume_from_step3(const std::string& a, const std::string& b, const std::string& extra,
                                         std::initializer_list<const char*> keys) {
    fs::create_directories(dir_ / b / "checkpoint");
    fs::copy(dir_ / a / "checkpoint" / "step-3", dir_ / b / "checkpoint" / "step-3", fs::copy_options::recursive);
    const CommandResult r = train(b, extra);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const std::vector<nlohmann::json> ra = read_jsonl(dir_ / a / "metrics.jsonl");
    const std::vector<nlohmann::json> rb = read_jsonl(dir_ / b / "metrics.jsonl");
    EXPECT_EQ(ra.size(), 6u);
    EXPECT_EQ(rb.size(), 3u) << "B trains steps 4..6 only";
    for (size_t i = 0; i < 3 && i < rb.size() && i + 3 < ra.size(); ++i) {
      const nlohmann::json& want = ra[i + 3];
      EXPECT_EQ(rb[i]["step"], want["step"]);
      for (const char* key : keys) {
        EXPECT_EQ(rb[i][key].get<double>(), want[key].get<double>()) << key << " at step " << want["step"];
      }
    }
    EXPECT_EQ(read_text(dir_ / b / "checkpoint" / "step-6" / "model.safetensors"),
              read_text(dir_ / a / "checkpoint" / "step-6" / "model.safetensors"))
        << "the resumed run ends with the same weights, to the bit";
    return r;
  }

  static fs::path dir_;
};
fs::path CliCheckpoint::dir_;

const std::string kSixSteps =
    "--training.steps 6 --training.local_batch_size 2 --training.seq_len 64 --model.n_layers 2 "
    "--metrics.log_freq 1 --training.deterministic --checkpoint.interval 3 ";

// A: 6 steps, checkpoints at 3 and 6. B: a fresh folder holding only A's step-3, same config:
// B resumes at step 4 and its losses and gradient norms for steps 4..6 equal A's exactly.
// C: A again with async saves: the same losses, and byte-identical checkpoint files.
// bf16 AdamW moments are checkpointed as stored (BF16 tensors) and a resume continues to the bit:
// the restored moments are the saved bits.
TEST_F(CliCheckpoint, Bf16OptimizerStatesResumeBitIdentically) {
  const std::string run = kSixSteps + "--optimizer.state_dtype bfloat16 ";
  const CommandResult a = train("bf16s_a", run);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const fs::path step3 = dir_ / "bf16s_a" / "checkpoint" / "step-3";
  const nlohmann::json manifest = nlohmann::json::parse(read_text(step3 / "manifest.json"));
  for (const auto& [name, entry] : manifest["tensors"]["optimizer"].items()) EXPECT_EQ(entry["dtype"], "BF16") << name;
  resume_from_step3("bf16s_a", "bf16s_b", run, {"loss", "grad_norm"});
}

// Muon: each Muon matrix's momentum buffer is checkpointed beside the AdamW moments of the rest
// ("<fqn>.momentum_buffer", f32), and a resume continues to the bit. A checkpoint of a Muon run
// does not resume as AdamW: its state names say which optimizer wrote it.
TEST_F(CliCheckpoint, MuonResumesBitIdentically) {
  const std::string run = kSixSteps + "--optimizer.name Muon ";
  const CommandResult a = train("muon_a", run);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const nlohmann::json manifest =
      nlohmann::json::parse(read_text(dir_ / "muon_a" / "checkpoint" / "step-3" / "manifest.json"));
  const nlohmann::json& optimizer = manifest["tensors"]["optimizer"];
  EXPECT_EQ(optimizer["layers.0.attention.wq.weight.momentum_buffer"]["dtype"], "F32");
  EXPECT_FALSE(optimizer.contains("layers.0.attention.wq.weight.exp_avg"));
  EXPECT_TRUE(optimizer.contains("tok_embeddings.weight.exp_avg_sq"));
  EXPECT_TRUE(optimizer.contains("layers.0.attention_norm.weight.exp_avg"));
  resume_from_step3("muon_a", "muon_b", run, {"loss", "grad_norm"});
  fs::create_directories(dir_ / "muon_as_adamw" / "checkpoint");
  fs::copy(dir_ / "muon_a" / "checkpoint" / "step-3", dir_ / "muon_as_adamw" / "checkpoint" / "step-3",
           fs::copy_options::recursive);
  const CommandResult adamw = train("muon_as_adamw", kSixSteps);
  EXPECT_EQ(adamw.exit_code, 1) << adamw.output;
  EXPECT_NE(adamw.output.find("optimizer.safetensors holds Muon state but this run's optimizer is AdamW. HINT: "
                              "resume with optimizer.name Muon"),
            std::string::npos)
      << adamw.output;
}

TEST_F(CliCheckpoint, ResumeIsBitIdenticalAndAsyncEqualsSync) {
  const CommandResult a = train("resume_a", kSixSteps);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const fs::path ckpt_a = dir_ / "resume_a" / "checkpoint";
  ASSERT_EQ(ckpt::check_checkpoint((ckpt_a / "step-3").string()), "");
  ASSERT_EQ(ckpt::check_checkpoint((ckpt_a / "step-6").string()), "");
  EXPECT_FALSE(ckpt::checkpoint_is_model_only((ckpt_a / "step-3").string()));
  EXPECT_TRUE(ckpt::checkpoint_is_model_only((ckpt_a / "step-6").string()))
      << "checkpoint.last_save_model_only (default true) makes the final save model-only";

  const CommandResult b = resume_from_step3("resume_a", "resume_b", kSixSteps, {"loss", "grad_norm", "lr"});
  EXPECT_NE(b.output.find("resuming from " + (dir_ / "resume_b" / "checkpoint" / "step-3").string() + " (step 3"),
            std::string::npos)
      << b.output;
  const std::vector<nlohmann::json> ra = read_jsonl(dir_ / "resume_a" / "metrics.jsonl");
  ASSERT_EQ(ra.size(), 6u);

  const CommandResult c = train("resume_async", kSixSteps + "--checkpoint.async_mode async");
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("handed to the background writer"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("training stalled"), std::string::npos) << c.output;
  const std::vector<nlohmann::json> rc = read_jsonl(dir_ / "resume_async" / "metrics.jsonl");
  ASSERT_EQ(rc.size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(rc[i]["loss"].get<double>(), ra[i]["loss"].get<double>()) << i + 1;
  const fs::path ckpt_c = dir_ / "resume_async" / "checkpoint";
  for (const char* f : {"step-3/model.safetensors", "step-3/optimizer.safetensors", "step-6/model.safetensors"}) {
    EXPECT_EQ(read_text(ckpt_c / f), read_text(ckpt_a / f)) << f;
  }
  EXPECT_EQ(ckpt::check_checkpoint((ckpt_c / "step-3").string()), "");

  // checkpoint.initial_load_path into a fresh run: the whole state continues exactly like a resume;
  // model-only (the default) takes the weights and starts at step 1.
  const std::string step3 = (ckpt_a / "step-3").string();
  const CommandResult full = train("initial_full", kSixSteps + "--checkpoint.initial_load_path " + step3 +
                                                       " --no-checkpoint.initial_load_model_only");
  ASSERT_EQ(full.exit_code, 0) << full.output;
  EXPECT_NE(full.output.find("initial load from " + step3 + " (step 3)"), std::string::npos) << full.output;
  const std::vector<nlohmann::json> rf = read_jsonl(dir_ / "initial_full" / "metrics.jsonl");
  ASSERT_EQ(rf.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(rf[i]["loss"].get<double>(), ra[i + 3]["loss"].get<double>()) << i + 4;
  const CommandResult weights = train("initial_weights", kSixSteps + "--checkpoint.initial_load_path " + step3);
  ASSERT_EQ(weights.exit_code, 0) << weights.output;
  EXPECT_NE(weights.output.find("initial load (model only) from " + step3), std::string::npos) << weights.output;
  EXPECT_EQ(read_jsonl(dir_ / "initial_weights" / "metrics.jsonl").size(), 6u);

  // A finished run relaunched has nothing to do (its newest checkpoint is the final step).
  const CommandResult again = train("resume_a", kSixSteps);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("nothing to do"), std::string::npos) << again.output;

  // load_step names a step that is not there: exit 1, and the error lists what is there.
  const CommandResult missing = train("resume_a", kSixSteps + "--checkpoint.load_step 4");
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_NE(missing.output.find("there: 6, 3"), std::string::npos) << missing.output;
}

// keep_latest_k counts resumable checkpoints: with k = 1 the final model-only save keeps the last
// full one, and a rerun with more steps continues from it (saying which) to the losses of a run
// that went the whole way. Without LR decay the schedule does not depend on training.steps.
TEST_F(CliCheckpoint, AFinishedRunContinuesWithMoreSteps) {
  const std::string flags =
      kSixSteps + "--checkpoint.keep_latest_k 1 --lr_scheduler.warmup_steps 2 --lr_scheduler.decay_ratio 0 ";
  const CommandResult six = train("cont", flags);
  ASSERT_EQ(six.exit_code, 0) << six.output;
  const fs::path ckpt = dir_ / "cont" / "checkpoint";
  EXPECT_EQ(ckpt::check_checkpoint((ckpt / "step-3").string()), "") << "the final save must not prune it";
  EXPECT_TRUE(ckpt::checkpoint_is_model_only((ckpt / "step-6").string()));
  const CommandResult nine = train("cont", flags + "--training.steps 9");
  ASSERT_EQ(nine.exit_code, 0) << nine.output;
  EXPECT_NE(nine.output.find("resuming from " + (ckpt / "step-3").string() + " (step 3"), std::string::npos)
      << nine.output;
  const CommandResult through = train("cont_ref", flags + "--training.steps 9");
  ASSERT_EQ(through.exit_code, 0) << through.output;
  const std::vector<nlohmann::json> want = read_jsonl(dir_ / "cont_ref" / "metrics.jsonl");
  const std::vector<nlohmann::json> got = read_jsonl(dir_ / "cont" / "metrics.jsonl");
  ASSERT_EQ(want.size(), 9u);
  ASSERT_EQ(got.size(), 12u) << "steps 1..6, then 4..9";
  for (size_t i = 6; i < 12; ++i) {
    EXPECT_EQ(got[i]["step"], want[i - 3]["step"]);
    EXPECT_EQ(got[i]["loss"].get<double>(), want[i - 3]["loss"].get<double>()) << "step " << want[i - 3]["step"];
  }
  // k = 1: the newest full checkpoint (step 6, saved again with its optimizer state) and the final
  // model-only step 9 remain.
  EXPECT_FALSE(fs::exists(ckpt / "step-3"));
  EXPECT_FALSE(ckpt::checkpoint_is_model_only((ckpt / "step-6").string()));
  EXPECT_TRUE(ckpt::checkpoint_is_model_only((ckpt / "step-9").string()));
}

// A mixture of experts with bias balancing: the selection bias is state (checkpointed with the
// weights under layers.<i>.moe.expert_bias), so a resume from step 3 still equals the run through.
TEST_F(CliCheckpoint, MoeWithBiasBalancingResumesBitIdentically) {
  const std::string flags = kSixSteps + "--model.name debug_moe --model.load_balance bias --model.load_balance_coeff 0.01 ";
  const CommandResult a = train("moe_a", flags);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const fs::path ckpt_a = dir_ / "moe_a" / "checkpoint";
  const ckpt::TrainState s = ckpt::load_train_state((ckpt_a / "step-3").string(), true);
  bool has_bias = false;
  for (const auto& [name, t] : s.model) {
    if (name != "layers.1.moe.expert_bias") continue;
    has_bias = true;
    float sum_abs = 0.0f;
    for (int64_t j = 0; j < t.numel(); ++j) sum_abs += std::fabs(t.data<float>()[j]);
    EXPECT_GT(sum_abs, 0.0f) << "three updates have moved the bias";
  }
  EXPECT_TRUE(has_bias);
  resume_from_step3("moe_a", "moe_b", flags, {"loss", "grad_norm", "expert_load_min", "expert_load_max"});
}

// A damaged newest checkpoint is reported and the previous one is used.
TEST_F(CliCheckpoint, CorruptNewestFallsBackToThePrevious) {
  const std::string flags = "--training.steps 4 --training.local_batch_size 2 --training.seq_len 32 "
                            "--model.n_layers 1 --checkpoint.interval 2 --no-checkpoint.last_save_model_only ";
  const CommandResult a = train("corrupt", flags);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const fs::path step4 = dir_ / "corrupt" / "checkpoint" / "step-4" / "optimizer.safetensors";
  {
    std::fstream f(step4, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(300);
    f.put('\x7f');
  }
  const CommandResult b = train("corrupt", "--training.steps 5 " + flags);
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NE(b.output.find("skipping " + (dir_ / "corrupt" / "checkpoint" / "step-4").string() +
                          ": optimizer.safetensors: crc32c"),
            std::string::npos)
      << b.output;
  EXPECT_NE(b.output.find("(step 2,"), std::string::npos) << b.output;
}

// At least 20 launches, each SIGKILLed after a delay drawn from a fixed-seed RNG, so kills land at
// startup, mid-step and mid-save. After each kill the newest valid checkpoint loads, and the next
// launch resumes from exactly it; finally one run is let finish.
TEST_F(CliCheckpoint, KilledAtRandomMomentsAlwaysResumes) {
  const fs::path run = dir_ / "kill";
  const fs::path folder = run / "checkpoint";
  const std::string flags = "--training.steps 100000 --training.local_batch_size 2 --training.seq_len 32 "
                            "--model.n_layers 1 --metrics.log_freq 1000 --checkpoint.interval 1 "
                            "--checkpoint.keep_latest_k 3 --lr_scheduler.warmup_steps 2 ";
  std::mt19937 rng(20261201);
  std::uniform_int_distribution<int> delay_ms(200, 2500);
  set_log_level(LogLevel::error);  // find_checkpoint's warnings about half-written steps are expected
  int resumes_checked = 0, kills_mid_save = 0;
  int64_t last_step = 0;
  const int kLaunches = 20;
  for (int i = 0; i < kLaunches; ++i) {
    std::optional<ckpt::CheckpointEntry> expect;
    ASSERT_NO_THROW(expect = ckpt::find_checkpoint(folder.string())) << "after kill " << i;
    if (expect) {
      ASSERT_NO_THROW(ckpt::load_train_state(expect->path)) << expect->path;
      EXPECT_GE(expect->step, last_step) << "a kill never loses a completed checkpoint";
      last_step = expect->step;
    }
    const fs::path log = dir_ / ("kill_" + std::to_string(i) + ".log");
    const pid_t pid = spawn_titan(train_args("kill", flags), log);
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    // A tmp folder of this pid present at the kill means the kill landed mid-save.
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "launch " << i << " ended before the kill:\n" << read_text(log);
    if (fs::exists(folder)) {
      for (const auto& e : fs::directory_iterator(folder)) {
        kills_mid_save += e.path().filename().string().find(".tmp-" + std::to_string(pid)) != std::string::npos;
      }
    }
    const std::string out = read_text(log);
    const size_t at = out.find("resuming from ");
    if (at == std::string::npos) {
      // Killed before the resume line, or nothing to resume from yet (a launch that got as far as
      // saving must have resumed first).
      EXPECT_TRUE(!expect || out.find("checkpoint step-") == std::string::npos) << "launch " << i
                                                                                 << " did not resume:\n" << out;
      continue;
    }
    ASSERT_TRUE(expect.has_value()) << out;
    EXPECT_EQ(out.substr(at, out.find('\n', at) - at).find("resuming from " + expect->path + " (step " +
                                                           std::to_string(expect->step) + ","),
              0u)
        << out;
    ++resumes_checked;
  }
  std::printf("%d launches killed; %d resumes checked; %d kills landed mid-save; newest step %lld\n", kLaunches,
              resumes_checked, kills_mid_save, static_cast<long long>(last_step));
  EXPECT_GE(resumes_checked, kLaunches / 4) << "most launches should live long enough to resume";

  // Let one run finish: 3 more steps than the newest checkpoint.
  const std::optional<ckpt::CheckpointEntry> newest = ckpt::find_checkpoint(folder.string());
  ASSERT_TRUE(newest.has_value());
  const int64_t end = newest->step + 3;
  const CommandResult done = run_titan(train_args("kill", flags + "--training.steps " + std::to_string(end)));
  set_log_level(LogLevel::info);
  ASSERT_EQ(done.exit_code, 0) << done.output;
  EXPECT_NE(done.output.find("resuming from " + newest->path), std::string::npos) << done.output;
  EXPECT_EQ(ckpt::find_checkpoint(folder.string())->step, end);
  EXPECT_EQ(ckpt::check_checkpoint((folder / ckpt::step_dir_name(end)).string()), "");
  // The stale tmp folders of the killed runs are gone, and keep_latest_k held: 3 full checkpoints
  // and the final model-only save, which is not counted.
  for (const auto& e : fs::directory_iterator(folder)) {
    EXPECT_NE(e.path().filename().string()[0], '.') << "left behind: " << e.path();
  }
  EXPECT_LE(ckpt::list_checkpoints(folder.string()).size(), 4u);
}

// How the threads of process `pid` take `signal`: how many there are, how many do not block it,
// and whether a handler is installed for it (/proc/<pid>/task/*/status, SigBlk and SigCgt).
struct SignalDisposition {
  int threads = 0, accepting = 0;
  bool handled = false;
};
SignalDisposition signal_disposition(pid_t pid, int signal) {
  SignalDisposition d;
  const uint64_t bit = uint64_t{1} << (signal - 1);
  for (const auto& task : fs::directory_iterator(fs::path("/proc") / std::to_string(pid) / "task")) {
    std::ifstream in(task.path() / "status");
    ++d.threads;
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("SigBlk:", 0) == 0 && (std::stoull(line.substr(7), nullptr, 16) & bit) == 0) ++d.accepting;
      if (line.rfind("SigCgt:", 0) == 0 && (std::stoull(line.substr(7), nullptr, 16) & bit) != 0) d.handled = true;
    }
  }
  return d;
}

// SIGTERM / SIGINT stop a run after the step in progress: the in-flight async save completes, the
// metrics end with whole rows, the exit code is 128 + the signal, and the rerun resumes from the
// newest checkpoint. No handler runs on a computing thread (stop_signal.h: one interrupting
// oneDNN's JIT GEMM corrupted the heap in about one run in four): every thread but one blocks the
// signal, and none has a handler for it. (A second signal would end the process at once.)
TEST_F(CliCheckpoint, SigtermAndSigintStopCleanly) {
  const std::string flags = "--training.steps 100000 --training.local_batch_size 2 --training.seq_len 32 "
                            "--model.n_layers 1 --metrics.log_freq 1 --checkpoint.interval 2 "
                            "--checkpoint.async_mode async ";
  for (const int signal : {SIGTERM, SIGINT}) {
    const std::string name = signal == SIGTERM ? "sigterm" : "sigint";
    const fs::path log = dir_ / (name + ".log");
    const pid_t pid = spawn_titan(train_args(name, flags), log);
    ASSERT_GT(pid, 0);
    const fs::path metrics = dir_ / name / "metrics.jsonl";
    for (int i = 0; i < 600 && (!fs::exists(metrics) || read_jsonl(metrics).size() < 5); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    const SignalDisposition taken = signal_disposition(pid, signal);
    kill(pid, signal);
    int status = 0;
    waitpid(pid, &status, 0);
    const std::string out = read_text(log);
    EXPECT_GE(taken.threads, 3) << "the training thread, the data loader's and the signal thread at least";
    EXPECT_EQ(taken.accepting, 1) << "one thread of " << taken.threads << " takes " << strsignal(signal);
    EXPECT_FALSE(taken.handled) << "no handler for " << strsignal(signal) << ": it would run on the thread it interrupts";
    ASSERT_TRUE(WIFEXITED(status)) << out;
    EXPECT_EQ(WEXITSTATUS(status), 128 + signal) << out;
    const size_t stop = out.find(std::string("titan: stopped by ") + (signal == SIGTERM ? "SIGTERM" : "SIGINT"));
    ASSERT_NE(stop, std::string::npos) << out;
    const std::vector<nlohmann::json> rows = read_jsonl(metrics);  // throws on a torn row
    ASSERT_GE(rows.size(), 5u);
    EXPECT_NE(out.find(titan::str("after step ", rows.back()["step"].get<int64_t>(), " of 100000"), stop), std::string::npos)
        << out;
    const std::optional<ckpt::CheckpointEntry> newest = ckpt::find_checkpoint((dir_ / name / "checkpoint").string());
    ASSERT_TRUE(newest.has_value());
    EXPECT_EQ(newest->step, rows.back()["step"].get<int64_t>() / 2 * 2) << "the last due save was written";
    const CommandResult again = train(name, flags + "--training.steps " + std::to_string(newest->step + 1));
    ASSERT_EQ(again.exit_code, 0) << again.output;
    EXPECT_NE(again.output.find("resuming from " + newest->path), std::string::npos) << again.output;
  }
}

}  // namespace
}  // namespace titan
