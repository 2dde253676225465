// `titan train` end to end (the binary, as a user runs it): learning on real text against a bound
// from the text's own unigram entropy, bit-identical determinism, gradient accumulation equal to a
// larger batch, the outputs of a run, the config commands, and one-line errors with exit code 2.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "integration/cli_runner.h"
#include "titan/checkpoint/safetensors.h"
#include "titan/data/tokenizer/tokenizer.h"

namespace titan {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::run_titan;
using testing::kShakespeare;
using testing::read_jsonl;
using testing::read_text;
using testing::scratch_dir;

// A small debug model on a corpus, with its own tokenizer trained by `titan train-tokenizer`.
class CliTrain : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = scratch_dir("train");
    ASSERT_TRUE(fs::exists(kShakespeare)) << kShakespeare;
    const CommandResult r = run_titan(str_cat("train-tokenizer --input ", kShakespeare.string(),
                                              " --vocab-size 1024 --out ", (dir_ / "tok").string()));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  template <class... Parts>
  static std::string str_cat(const Parts&... parts) {
    std::ostringstream os;
    (os << ... << parts);
    return os.str();
  }

  // `titan train` of a tiny run on tinyshakespeare into dir_/name; extra overrides appended.
  static CommandResult train(const std::string& name, const std::string& extra) {
    return run_titan(str_cat("train --config qwen3_debug --job.dump_folder ", (dir_ / name).string(),
                             " --model.hf_assets_path ", (dir_ / "tok").string(), " --training.dataset_path ",
                             kShakespeare.string(), " --metrics.peak_tflops 1 ", extra));
  }

  static fs::path dir_;
};
fs::path CliTrain::dir_;

// The loss falls below the unigram entropy of the text (in nats per token, under the same
// tokenizer): a model that only learned token frequencies would sit at that entropy, so being below
// it means the model uses context. Computed here from the text, not taken from a run of ours.
TEST_F(CliTrain, LearnsBeyondUnigramOnTinyShakespeare) {
  const data::Tokenizer tok = data::Tokenizer::from_file((dir_ / "tok").string());
  const std::vector<int32_t> ids = tok.encode(read_text(kShakespeare));
  std::map<int32_t, double> counts;
  for (const int32_t id : ids) counts[id] += 1.0;
  double entropy = 0.0;
  for (const auto& [id, n] : counts) {
    const double p = n / static_cast<double>(ids.size());
    entropy -= p * std::log(p);
  }
  ASSERT_GT(entropy, 3.0);  // a real text under a 1024-token vocabulary

  const CommandResult r = train("learn", "--training.steps 60 --training.local_batch_size 8 --training.seq_len 64 "
                                         "--model.n_layers 2 --lr_scheduler.warmup_steps 10 --metrics.log_freq 5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<nlohmann::json> rows = read_jsonl(dir_ / "learn" / "metrics.jsonl");
  ASSERT_GE(rows.size(), 3u);
  const double first = rows.front()["loss"].get<double>(), last = rows.back()["loss"].get<double>();
  EXPECT_GT(first, std::log(1024.0)) << "an untrained model does no better than uniform over the vocabulary";
  std::printf("unigram entropy %.4f nats/token; loss %.4f at step 1, %.4f at step %d\n", entropy, first, last,
              rows.back()["step"].get<int>());
  EXPECT_LT(last, entropy) << "final loss " << last << " is not below the unigram entropy " << entropy << "\n"
                           << r.output;
}

// Same config and seed, same thread count: the same loss sequence to the bit.
TEST_F(CliTrain, DeterministicRunsAreBitIdentical) {
  const std::string flags = "--training.steps 6 --training.local_batch_size 2 --training.seq_len 64 "
                            "--model.n_layers 2 --metrics.log_freq 1 --training.deterministic";
  const CommandResult a = train("det_a", flags), b = train("det_b", flags);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const std::vector<nlohmann::json> ra = read_jsonl(dir_ / "det_a" / "metrics.jsonl");
  const std::vector<nlohmann::json> rb = read_jsonl(dir_ / "det_b" / "metrics.jsonl");
  ASSERT_EQ(ra.size(), 6u);
  ASSERT_EQ(rb.size(), 6u);
  for (size_t i = 0; i < ra.size(); ++i) {
    EXPECT_EQ(ra[i]["loss"].get<double>(), rb[i]["loss"].get<double>()) << "step " << i + 1;
    EXPECT_EQ(ra[i]["grad_norm"].get<double>(), rb[i]["grad_norm"].get<double>()) << "step " << i + 1;
  }
}

// Activation checkpointing replays the same kernels: every mode trains the same losses and gradient
// norms bit for bit, and full keeps less than none at its peak. qwen3_debug's 4 layers (so every
// 2nd block is a real selection), on a quarter of its batch for 4 steps: each step after the first
// runs the same code as the next, so more steps repeat the proof (the 8 steps of the full
// batch cost 8x the time and tested nothing more).
TEST_F(CliTrain, ActivationCheckpointingTrainsTheSameBits) {
  const std::string common = "--training.steps 4 --metrics.log_freq 1 --training.deterministic "
                             "--training.local_batch_size 4 --training.seq_len 128 ";
  const std::vector<std::pair<std::string, std::string>> modes = {
      {"ac_none", "--activation_checkpoint.mode none"},
      {"ac_full", "--activation_checkpoint.mode full"},
      {"ac_op", "--activation_checkpoint.mode selective --activation_checkpoint.selective_ac_option op"},
      {"ac_2", "--activation_checkpoint.mode selective --activation_checkpoint.selective_ac_option 2"}};
  std::vector<std::vector<nlohmann::json>> rows;
  for (const auto& [name, flags] : modes) {
    const CommandResult r = train(name, common + flags);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    rows.push_back(read_jsonl(dir_ / name / "metrics.jsonl"));
    ASSERT_EQ(rows.back().size(), 4u) << name;
  }
  for (size_t m = 1; m < modes.size(); ++m) {
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(rows[m][i]["loss"].get<double>(), rows[0][i]["loss"].get<double>()) << modes[m].first << " step " << i + 1;
      EXPECT_EQ(rows[m][i]["grad_norm"].get<double>(), rows[0][i]["grad_norm"].get<double>()) << modes[m].first;
    }
    // Peak memory is the allocator's count of bytes, not a timing.
    EXPECT_LT(rows[m][3]["memory_gib"].get<double>(), rows[0][3]["memory_gib"].get<double>()) << modes[m].first;
  }
}

// bf16 mixed precision tracks float32 (the bf16 issue's bars): the step-1 loss within 0.5% (the same
// weights and batch, only rounding differs) and the mean of the last 20 losses within 2%. Then
// activation checkpointing in bf16 replays the same casts and kernels: the same bits as without.
TEST_F(CliTrain, Bf16TracksFloat32AndCheckpointsBitIdentically) {
  const std::string common = "--training.steps 60 --training.local_batch_size 4 --training.seq_len 64 "
                             "--model.n_layers 2 --lr_scheduler.warmup_steps 10 --metrics.log_freq 1 "
                             "--training.deterministic ";
  const CommandResult f32 = train("prec_f32", common + "--training.mixed_precision_param float32");
  const CommandResult bf16 = train("prec_bf16", common + "--training.mixed_precision_param bfloat16");
  ASSERT_EQ(f32.exit_code, 0) << f32.output;
  ASSERT_EQ(bf16.exit_code, 0) << bf16.output;
  EXPECT_NE(bf16.output.find("[precision] bfloat16 compute"), std::string::npos) << bf16.output;
  const std::vector<nlohmann::json> a = read_jsonl(dir_ / "prec_f32" / "metrics.jsonl");
  const std::vector<nlohmann::json> b = read_jsonl(dir_ / "prec_bf16" / "metrics.jsonl");
  ASSERT_EQ(a.size(), 60u);
  ASSERT_EQ(b.size(), 60u);
  const double first_a = a[0]["loss"].get<double>(), first_b = b[0]["loss"].get<double>();
  EXPECT_LT(std::abs(first_b - first_a) / first_a, 0.005) << first_b << " vs " << first_a;
  EXPECT_NE(first_b, first_a) << "bf16 rounds the weights and activations: the losses cannot be the f32 ones";
  double mean_a = 0.0, mean_b = 0.0;
  for (size_t i = 40; i < 60; ++i) {
    mean_a += a[i]["loss"].get<double>() / 20.0;
    mean_b += b[i]["loss"].get<double>() / 20.0;
  }
  std::printf("step 1: f32 %.6f bf16 %.6f; mean of the last 20: f32 %.6f bf16 %.6f\n", first_a, first_b, mean_a, mean_b);
  EXPECT_LT(std::abs(mean_b - mean_a) / mean_a, 0.02) << mean_b << " vs " << mean_a;
  EXPECT_LT(mean_b, first_b - 1.0) << "bf16 training must learn";

  // AdamW moments in bf16 (optimizer.state_dtype; f32 compute) track f32 moments: issue 31's bar,
  // the mean of the last 20 losses within 1%.
  const CommandResult states = train("prec_bf16_states", common + "--optimizer.state_dtype bfloat16");
  ASSERT_EQ(states.exit_code, 0) << states.output;
  const std::vector<nlohmann::json> s = read_jsonl(dir_ / "prec_bf16_states" / "metrics.jsonl");
  ASSERT_EQ(s.size(), 60u);
  EXPECT_EQ(s[0]["loss"].get<double>(), first_a) << "step 1 runs before any moment is read";
  double mean_s = 0.0;
  for (size_t i = 40; i < 60; ++i) mean_s += s[i]["loss"].get<double>() / 20.0;
  std::printf("bf16 moments: mean of the last 20 %.6f (f32 moments %.6f)\n", mean_s, mean_a);
  EXPECT_LT(std::abs(mean_s - mean_a) / mean_a, 0.01) << mean_s << " vs " << mean_a;
  EXPECT_NE(s[1]["loss"].get<double>(), a[1]["loss"].get<double>()) << "step 2 reads rounded moments";

  const std::string short_run = "--training.steps 6 --training.local_batch_size 2 --training.seq_len 64 "
                                "--model.n_layers 2 --metrics.log_freq 1 --training.deterministic "
                                "--training.mixed_precision_param bfloat16 ";
  const CommandResult none = train("bf16_ac_none", short_run);
  const CommandResult full = train("bf16_ac_full", short_run + "--activation_checkpoint.mode full");
  const CommandResult op = train("bf16_ac_op", short_run + "--activation_checkpoint.mode selective "
                                                           "--activation_checkpoint.selective_ac_option op");
  for (const CommandResult* r : {&none, &full, &op}) ASSERT_EQ(r->exit_code, 0) << r->output;
  const std::vector<nlohmann::json> rn = read_jsonl(dir_ / "bf16_ac_none" / "metrics.jsonl");
  for (const char* name : {"bf16_ac_full", "bf16_ac_op"}) {
    const std::vector<nlohmann::json> r = read_jsonl(dir_ / name / "metrics.jsonl");
    ASSERT_EQ(r.size(), rn.size()) << name;
    for (size_t i = 0; i < r.size(); ++i) {
      EXPECT_EQ(r[i]["loss"].get<double>(), rn[i]["loss"].get<double>()) << name << " step " << i + 1;
      EXPECT_EQ(r[i]["grad_norm"].get<double>(), rn[i]["grad_norm"].get<double>()) << name << " step " << i + 1;
    }
  }
}

// LoRA end to end on an HF base folder: the run learns, the checkpoint holds the adapters only and
// resumes bit for bit, and the two exports agree: `titan forward` of the merged HF folder equals
// `titan forward --adapter` of the PEFT folder on the base (fp32 rounding of the merge apart).
TEST_F(CliTrain, LoraTrainsResumesAndItsTwoExportsAgree) {
  const std::string small = "--model.n_layers 2 --training.seq_len 64 --metrics.log_freq 1 --training.deterministic ";
  const CommandResult base = train("lora_base", small + "--training.local_batch_size 2 --training.steps 2 "
                                                        "--checkpoint.enable --checkpoint.last_save_in_hf");
  ASSERT_EQ(base.exit_code, 0) << base.output;
  const std::string base_hf = (dir_ / "lora_base" / "checkpoint" / "hf").string();
  const std::string lora = small + "--training.local_batch_size 8 --training.steps 30 --lora.rank 4 --lora.alpha 8 "
                           "--optimizer.lr 1e-2 --lr_scheduler.warmup_steps 1 --checkpoint.initial_load_path " +
                           base_hf + " --checkpoint.initial_load_in_hf --checkpoint.enable --checkpoint.interval 10 ";
  const CommandResult straight = train("lora", lora + "--checkpoint.last_save_in_hf --lora.save_adapter adapter");
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  EXPECT_NE(straight.output.find("[Override] lora: model.layers.1.feed_forward.w2 Linear -> LoraLinear"),
            std::string::npos) << straight.output;
  EXPECT_NE(straight.output.find("Applied 14 override(s)"), std::string::npos) << straight.output;
  const std::vector<nlohmann::json> a = read_jsonl(dir_ / "lora" / "metrics.jsonl");
  ASSERT_EQ(a.size(), 30u);
  double first = 0.0, last = 0.0;
  for (size_t i = 0; i < 5; ++i) {
    first += a[i]["loss"].get<double>() / 5.0;
    last += a[25 + i]["loss"].get<double>() / 5.0;
  }
  EXPECT_LT(last, first - 0.3) << "the adapters must learn";

  // The checkpoint holds the adapters (lora_A / lora_B) and nothing of the frozen base.
  const ckpt::SafetensorsFile step10 =
      ckpt::SafetensorsFile::open((dir_ / "lora/checkpoint/step-10/model.safetensors").string());
  ASSERT_EQ(step10.tensors().size(), 28u);  // 2 layers x 7 projections x {A, B}
  for (const ckpt::TensorInfo& t : step10.tensors()) EXPECT_NE(t.name.find(".lora_"), std::string::npos) << t.name;
  const CommandResult convert = run_titan(str_cat("convert --from ", (dir_ / "lora/checkpoint/step-10").string(),
                                                  " --to ", (dir_ / "lora_converted").string(), " --to-hf"));
  EXPECT_NE(convert.exit_code, 0) << convert.output;
  EXPECT_NE(convert.output.find("is a LoRA checkpoint: it holds the adapters only"), std::string::npos) << convert.output;
  EXPECT_FALSE(fs::exists(dir_ / "lora_converted"));

  // Activation checkpointing replays LoRA projections like any linear: the same bits.
  const CommandResult ac = train("lora_ac", lora + "--activation_checkpoint.mode full");
  ASSERT_EQ(ac.exit_code, 0) << ac.output;
  const std::vector<nlohmann::json> c = read_jsonl(dir_ / "lora_ac" / "metrics.jsonl");
  ASSERT_EQ(c.size(), a.size());
  for (size_t i = 0; i < c.size(); ++i) EXPECT_EQ(c[i]["loss"].get<double>(), a[i]["loss"].get<double>()) << i + 1;

  // Resumed from step 20 (the base loaded again from its HF folder): steps 21..30 to the bit.
  fs::create_directories(dir_ / "lora_resumed" / "checkpoint");
  fs::copy(dir_ / "lora/checkpoint/step-20", dir_ / "lora_resumed/checkpoint/step-20", fs::copy_options::recursive);
  const CommandResult resumed = train("lora_resumed", lora);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const std::vector<nlohmann::json> b = read_jsonl(dir_ / "lora_resumed" / "metrics.jsonl");
  ASSERT_EQ(b.size(), 10u);
  for (size_t i = 0; i < b.size(); ++i) {
    EXPECT_EQ(b[i]["loss"].get<double>(), a[20 + i]["loss"].get<double>()) << "step " << 21 + i;
  }

  Tensor ids = Tensor::empty({2, 16}, DType::i64);
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = (i * 37 + 11) % 1000;
  const std::string tokens = (dir_ / "lora_tokens.safetensors").string();
  ckpt::write_safetensors(tokens, {{"input_ids", ids}});
  const std::string merged_out = (dir_ / "lora_merged.safetensors").string(),
                    adapter_out = (dir_ / "lora_adapter.safetensors").string();
  const CommandResult m = run_titan(str_cat("forward --model ", (dir_ / "lora/checkpoint/hf").string(), " --tokens ",
                                            tokens, " --out ", merged_out));
  const CommandResult p = run_titan(str_cat("forward --model ", base_hf, " --adapter ", (dir_ / "lora/adapter").string(),
                                            " --tokens ", tokens, " --out ", adapter_out));
  ASSERT_EQ(m.exit_code, 0) << m.output;
  ASSERT_EQ(p.exit_code, 0) << p.output;
  const Tensor lm = ckpt::SafetensorsFile::open(merged_out).get("logits"),
               lp = ckpt::SafetensorsFile::open(adapter_out).get("logits");
  ASSERT_EQ(lm.shape(), lp.shape());
  double err = 0.0, peak = 0.0;
  for (int64_t i = 0; i < lm.numel(); ++i) {
    err = std::max(err, static_cast<double>(std::fabs(lm.data<float>()[i] - lp.data<float>()[i])));
    peak = std::max(peak, static_cast<double>(std::fabs(lp.data<float>()[i])));
  }
  std::printf("merged export vs base + adapter: logits max abs err %.2e (max |logit| %.2f)\n", err, peak);
  EXPECT_LT(err, 1e-4 * std::max(1.0, peak));
}

// Config edges that used to be silent or late: a job file naming another job file, a checkpoint
// folder that is a file (found before step 1, not at the first save), an HF load pointed at a
// native checkpoint.
TEST_F(CliTrain, ConfigEdgesAreOneLineErrorsBeforeStep1) {
  {
    std::ofstream(dir_ / "inner.toml") << "[training]\nsteps = 2\n";
    std::ofstream(dir_ / "outer.toml") << "[job]\nconfig_file = \"" << (dir_ / "inner.toml").string() << "\"\n";
  }
  const CommandResult nested = train("edge1", "--job.config_file " + (dir_ / "outer.toml").string());
  EXPECT_EQ(nested.exit_code, 2) << nested.output;
  EXPECT_NE(nested.output.find("names another job file, which would not be read"), std::string::npos) << nested.output;
  fs::create_directories(dir_ / "edge2");
  { std::ofstream(dir_ / "edge2" / "checkpoint") << "a file"; }
  const CommandResult file = train("edge2", "--training.steps 1 --checkpoint.enable");
  EXPECT_EQ(file.exit_code, 2) << file.output;
  EXPECT_NE(file.output.find("is a file, so no checkpoint could be saved there"), std::string::npos) << file.output;
  EXPECT_EQ(file.output.find("step:"), std::string::npos) << file.output;
  const CommandResult saved = train("edge3", "--training.steps 1 --model.n_layers 2 --training.seq_len 64 "
                                             "--training.local_batch_size 2 --checkpoint.enable");
  ASSERT_EQ(saved.exit_code, 0) << saved.output;
  const CommandResult native = train("edge4", "--training.steps 1 --model.n_layers 2 --checkpoint.initial_load_path " +
                                                  (dir_ / "edge3" / "checkpoint" / "step-1").string() +
                                                  " --checkpoint.initial_load_in_hf");
  EXPECT_EQ(native.exit_code, 2) << native.output;
  EXPECT_NE(native.output.find("is a native titan checkpoint (manifest.json), not a Hugging Face folder"),
            std::string::npos) << native.output;
}

// Batch geometry the data or the model cannot hold is refused before it runs for minutes: a
// sequence longer than the model's positions, and a batch that would pass over a tiny dataset
// more than 100 times (a few passes, as when overfitting a few lines, run with a warning).
TEST_F(CliTrain, AbsurdBatchGeometryIsRefused) {
  const CommandResult long_seq = train("geo1", "--training.steps 1 --training.seq_len 100000000");
  EXPECT_EQ(long_seq.exit_code, 2) << long_seq.output;
  EXPECT_NE(long_seq.output.find("training.seq_len=100000000 is longer than the 2048 positions of model 'debug'"),
            std::string::npos) << long_seq.output;
  const CommandResult val_seq = train("geo2", "--training.steps 1 --validation.enable --validation.seq_len 4096 --validation.dataset_path " +
                                               kShakespeare.string());
  EXPECT_EQ(val_seq.exit_code, 2) << val_seq.output;
  EXPECT_NE(val_seq.output.find("validation.seq_len=4096 is longer than the 2048"), std::string::npos) << val_seq.output;
  { std::ofstream(dir_ / "tiny.txt") << "To be, or not to be.\n"; }
  const std::string tiny = "--training.steps 2 --model.n_layers 1 --training.seq_len 64 --training.dataset_path " +
                           (dir_ / "tiny.txt").string();
  const CommandResult few = train("geo3", tiny + " --training.local_batch_size 2");
  EXPECT_EQ(few.exit_code, 0) << few.output;
  EXPECT_NE(few.output.find("fewer than one batch (130): every batch repeats the dataset"), std::string::npos)
      << few.output;
  const CommandResult absurd = train("geo4", tiny + " --training.local_batch_size 64");
  EXPECT_NE(absurd.exit_code, 0) << absurd.output;
  EXPECT_NE(absurd.output.find("more than 100 passes over the dataset per batch"), std::string::npos) << absurd.output;
  EXPECT_EQ(absurd.output.find("step:  1"), std::string::npos) << absurd.output;
}

// The data hints name real fields: training.dataset_text_field picks the JSONL field,
// training.dataset_skip_bad_lines counts and skips a bad line.
TEST_F(CliTrain, DatasetFieldAndSkipBadLinesAreConfigFields) {
  const std::string text = read_text(kShakespeare).substr(0, 20000);
  {
    std::ofstream out(dir_ / "body.jsonl");
    std::ofstream good(dir_ / "body_good.jsonl");
    out << "{not json\n";  // first, so that step 1 reads it
    for (size_t i = 0; i < text.size(); i += 2000) {
      out << nlohmann::json{{"body", text.substr(i, 2000)}}.dump() << "\n";
      good << nlohmann::json{{"body", text.substr(i, 2000)}}.dump() << "\n";
    }
  }
  const std::string common = "--training.steps 1 --training.local_batch_size 2 --training.seq_len 64 "
                             "--model.n_layers 2 --training.dataset_path " + (dir_ / "body.jsonl").string();
  const CommandResult missing = run_titan(str_cat("train --config qwen3_debug --job.dump_folder ", (dir_ / "field1").string(),
                                                  " --model.hf_assets_path ", (dir_ / "tok").string(), " ", common,
                                                  " --training.dataset_path ", (dir_ / "body_good.jsonl").string()));
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("no field \"text\" (training.dataset_text_field"), std::string::npos) << missing.output;
  const CommandResult bad = run_titan(str_cat("train --config qwen3_debug --job.dump_folder ", (dir_ / "field2").string(),
                                              " --model.hf_assets_path ", (dir_ / "tok").string(), " ", common,
                                              " --training.dataset_text_field body"));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("set training.dataset_skip_bad_lines to count and skip"), std::string::npos) << bad.output;
  const CommandResult ok = run_titan(str_cat("train --config qwen3_debug --job.dump_folder ", (dir_ / "field3").string(),
                                             " --model.hf_assets_path ", (dir_ / "tok").string(), " ", common,
                                             " --training.dataset_text_field body --training.dataset_skip_bad_lines"));
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
}

// global_batch_size = 2 x local_batch_size (two micro-batches, loss normalised by the step's total
// target count) equals one batch of twice the rows: same tokens, same mean loss and gradient.
TEST_F(CliTrain, AccumulationEqualsTheLargerBatch) {
  const std::string common = "--training.steps 3 --training.seq_len 64 --model.n_layers 2 --metrics.log_freq 1 ";
  const CommandResult big = train("acc_big", common + "--training.local_batch_size 4");
  const CommandResult acc = train("acc_two", common + "--training.local_batch_size 2 --training.global_batch_size 4");
  ASSERT_EQ(big.exit_code, 0) << big.output;
  ASSERT_EQ(acc.exit_code, 0) << acc.output;
  const std::vector<nlohmann::json> rb = read_jsonl(dir_ / "acc_big" / "metrics.jsonl");
  const std::vector<nlohmann::json> ra = read_jsonl(dir_ / "acc_two" / "metrics.jsonl");
  ASSERT_EQ(rb.size(), 3u);
  ASSERT_EQ(ra.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(ra[i]["tokens"].get<int64_t>(), rb[i]["tokens"].get<int64_t>());
    for (const char* key : {"loss", "grad_norm"}) {
      const double want = rb[i][key].get<double>(), got = ra[i][key].get<double>();
      EXPECT_NEAR(got, want, 1e-4 * std::abs(want)) << key << " at step " << i + 1;
    }
  }
}

TEST_F(CliTrain, WritesConfigMetricsTensorBoardAndPlot) {
  const CommandResult r = train("outputs", "--training.steps 4 --training.local_batch_size 2 --training.seq_len 32 "
                                           "--model.n_layers 1 --metrics.log_freq 2 --metrics.enable_tensorboard");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path out = dir_ / "outputs";
  // Console: steps 1, 2, 4 (step 1 always, then every log_freq, and the last).
  EXPECT_NE(r.output.find("step:     1  loss:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("step:     4  loss:"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step:     3  loss:"), std::string::npos) << r.output;
  for (const char* key : {"grad_norm:", "memory:", "tps:", "tflops:", "mfu:", "lr:"}) {
    EXPECT_NE(r.output.find(key), std::string::npos) << key;
  }
  EXPECT_EQ(read_jsonl(out / "metrics.jsonl").size(), 3u);
  const std::string svg = read_text(out / "loss.svg");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u) << svg.substr(0, 100);
  EXPECT_NE(read_text(out / "config.toml").find("steps = 4"), std::string::npos);
  bool has_events = false;
  for (const auto& e : fs::directory_iterator(out / "tb")) {
    has_events |= e.path().filename().string().rfind("events.out.tfevents.", 0) == 0 && fs::file_size(e.path()) > 0;
  }
  EXPECT_TRUE(has_events);
}

TEST_F(CliTrain, NonFiniteLossStopsNamingTheStep) {
  const CommandResult r = train("nan", "--training.steps 20 --training.local_batch_size 2 --training.seq_len 32 "
                                       "--model.n_layers 1 --optimizer.lr 1e30 --lr_scheduler.warmup_steps 0 "
                                       "--training.max_norm 0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("titan: error: [train] step "), std::string::npos) << r.output;
}

// The MoE debug model (8 experts, top-2) trains with either balancing, logging its expert load
// (tokens per expert per layer; uniform would be 4 x 64 x 2 / 8 = 64) and, with aux_loss, HF's aux
// loss (k = 2 for a perfectly even router, E = 8 at worst).
TEST_F(CliTrain, MixtureOfExpertsTrainsAndLogsItsExpertLoad) {
  for (const std::string balance : {"aux_loss", "bias"}) {
    const CommandResult r =
        train("moe_" + balance, "--model.name debug_moe --model.n_layers 2 --model.load_balance " + balance +
                                    " --training.steps 10 --training.local_batch_size 4 --training.seq_len 64 "
                                    "--metrics.log_freq 1 --lr_scheduler.warmup_steps 2");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("expert_load: "), std::string::npos) << r.output;
    const std::vector<nlohmann::json> rows = read_jsonl(dir_ / ("moe_" + balance) / "metrics.jsonl");
    ASSERT_EQ(rows.size(), 10u);
    for (const nlohmann::json& row : rows) {
      EXPECT_LE(row["expert_load_min"].get<int64_t>(), 64) << row.dump();
      EXPECT_GE(row["expert_load_max"].get<int64_t>(), 64) << row.dump();
      const double aux = row["aux_loss"].get<double>();
      if (balance == "aux_loss") {
        EXPECT_GE(aux, 1.0) << row.dump();
        EXPECT_LE(aux, 8.0) << row.dump();
      } else {
        EXPECT_EQ(aux, 0.0) << row.dump();
      }
    }
    EXPECT_LT(rows.back()["loss"].get<double>(), rows.front()["loss"].get<double>() - 0.5) << r.output;
  }
}

TEST(CliTrainConfig, ErrorsAreOneLineWithExitCode2) {
  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases = {
      {"train --config qwen3_nope", "qwen3_debug"},  // lists the registered names
      {"train --config qwen3_debug --training.step 3", "--training.steps"},  // suggests the nearest field
      {"train --config qwen3_debug --training.steps abc", "training.steps"},
      {"train --config qwen3_debug --training.global_batch_size 12", "global_batch_size"},
      {"train --config qwen3_debug --lr_scheduler.decay_type exp", "decay_type"},
      {"train --config qwen3_debug --job.config_file /nonexistent/job.toml", "/nonexistent/job.toml"},
      {"train --training.steps 3", "--config"},
      {"train --config qwen3_debug --model.load_balance aux", "model.load_balance"},
      {"train --config qwen3_debug --model.load_balance_coeff -1", "model.load_balance_coeff"},
      {"train --config qwen3_debug --activation_checkpoint.mode partial", "activation_checkpoint.mode"},
      {"train --config qwen3_debug --activation_checkpoint.mode selective --activation_checkpoint.selective_ac_option "
       "ops", "activation_checkpoint.selective_ac_option"},
      {"train --config qwen3_debug --lora.rank 4 --lora.dropout 1", "lora.dropout=1 must be in [0, 1)"},
      {"train --config qwen3_debug --model.name debug_moe --model.router_aux_loss_coef nan", "'nan' is not a finite number"},
      {"train --config qwen3_debug --model.name debug_moe --model.router_aux_loss_coef 1e39",
       "does not fit the float32 the model computes with"},
      {"train --config qwen3_debug --training.steps 99999999999999999999", "out of range for a 64-bit integer"},
      {"train --config qwen3_debug --lora.rank -1", "lora.rank=-1 must be >= 0"},
      {"train --config qwen3_debug --lora.save_adapter a", "needs lora.rank > 0"},
      {"train --config qwen3_debug --lora.rank 4 --lora.dropout 0.1 --parallelism.tensor_parallel_degree 2",
       "LoRA dropout is not tensor-parallel yet"},
      {"train --config qwen3_debug --optimizer.name Lion", "optimizer.name='Lion' is not supported; use AdamW or Muon"},
      {"train --config qwen3_debug --optimizer.muon_adjust_lr rms", "optimizer.muon_adjust_lr='rms'"},
      {"train --config qwen3_debug --optimizer.muon_ns_steps 0", "optimizer.muon_ns_steps=0 must be in 1..99"},
      {"train --config qwen3_debug --optimizer.muon_momentum 1", "optimizer.muon_momentum=1 must be in [0, 1)"},
      {"train --config qwen3_debug --lora.base_quantization nf4", "lora.base_quantization=nf4 needs lora.rank > 0"},
      {"train --config qwen3_debug --lora.rank 4 --lora.base_quantization fp4",
       "lora.base_quantization='fp4' is not none, nf4, int8 or gguf"},
      {"train --config qwen3_debug --lora.rank 4 --lora.base_quantization nf4 --parallelism.tensor_parallel_degree 2",
       "a quantized base is not tensor-parallel"},
  };
  for (const Case& c : cases) {
    const CommandResult r = run_titan(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << c.args << "\n" << r.output;
  }
}

// LoRA target modules that match no projection of the model (the debug model has 4 layers) would
// train 0 parameters: refused with exit 2 before step 1, the error the last line.
TEST_F(CliTrain, LoraTargetsMatchingNothingAreRefused) {
  const CommandResult r = train("lora_targets", "--training.steps 1 --training.seq_len 16 --lora.rank 4 "
                                                "--lora.target_modules 'layers.99.*'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  const size_t error = r.output.find("titan: error: [lora] lora.target_modules='layers.99.*' matches no projection");
  ASSERT_NE(error, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\n', error), r.output.size() - 1) << "the error is the last line\n" << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "lora_targets" / "metrics.jsonl")) << "refused before step 1";
}

// Muon given a parameter it cannot take (a norm weight: not a matrix) is refused with exit 2
// before step 1, naming the parameter and the fix.
TEST_F(CliTrain, MuonOnANormIsRefused) {
  const CommandResult r = train("muon_norm", "--training.steps 1 --training.seq_len 16 --optimizer.name Muon "
                                             "--optimizer.muon_params 'layers.*.attention*'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  const size_t error = r.output.find("titan: error: optimizer.muon_params='layers.*.attention*': Muon cannot take "
                                     "layers.0.attention_norm.weight [256], a vector (a norm weight or a bias); AdamW "
                                     "updates it. HINT:");
  ASSERT_NE(error, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\n', error), r.output.size() - 1) << "the error is the last line\n" << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "muon_norm" / "metrics.jsonl")) << "refused before step 1";
}

// A LoRA checkpoint resumed with another lora.alpha would scale its adapters' update by
// alpha / rank differently from the steps that trained them: refused (exit 2), naming both values.
TEST_F(CliTrain, ResumingLoraWithAnotherAlphaIsRefused) {
  const std::string run = "--model.n_layers 1 --training.seq_len 16 --training.local_batch_size 2 --lora.rank 2 "
                          "--checkpoint.enable --no-checkpoint.last_save_model_only ";
  const CommandResult first = train("lora_alpha", run + "--training.steps 1 --lora.alpha 8");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const CommandResult other = train("lora_alpha", run + "--training.steps 2 --lora.alpha 4");
  EXPECT_EQ(other.exit_code, 2) << other.output;
  const size_t error = other.output.find("titan: error: ");
  ASSERT_NE(error, std::string::npos) << other.output;
  EXPECT_NE(other.output.find("was trained with lora.alpha 8", error), std::string::npos) << other.output;
  EXPECT_NE(other.output.find("this run has lora.alpha 4", error), std::string::npos) << other.output;
  EXPECT_EQ(other.output.find('\n', error), other.output.size() - 1) << "the error is the last line\n" << other.output;
  EXPECT_FALSE(fs::exists(dir_ / "lora_alpha" / "checkpoint" / "step-2")) << "refused before step 2";
  const CommandResult same = train("lora_alpha", run + "--training.steps 2 --lora.alpha 8");
  EXPECT_EQ(same.exit_code, 0) << same.output;
}

// Adapters trained over one base (none, nf4, int8) resumed over another said nothing (issue 49's
// sweep, item 16): they would continue on other base weights. Refused both ways, naming both.
TEST_F(CliTrain, ResumingLoraOverAnotherBaseQuantizationIsRefused) {
  const std::string run = "--model.n_layers 1 --training.seq_len 16 --training.local_batch_size 2 --lora.rank 2 "
                          "--checkpoint.enable --no-checkpoint.last_save_model_only ";
  ASSERT_EQ(train("lora_quant", run + "--training.steps 1").exit_code, 0);
  for (const char* other : {"nf4", "int8"}) {
    const CommandResult r = train("lora_quant", run + "--training.steps 2 --lora.base_quantization " + other);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("trained its adapters over a base stored as lora.base_quantization none, this run has " +
                            std::string(other)),
              std::string::npos)
        << r.output;
  }
  EXPECT_FALSE(fs::exists(dir_ / "lora_quant" / "checkpoint" / "step-2")) << "refused before step 2";
  EXPECT_EQ(train("lora_quant", run + "--training.steps 2").exit_code, 0);
}

// MoE settings the model cannot take fail before any work, in one line.
// A tokenizer larger than the named model, in a folder that has a config.json (the fine-tune flow
// with model.name left at the config function's): the hint says --model.name= builds the folder's model.
TEST(CliTrainConfig, TokenizerLargerThanTheModelHintsTheFoldersModel) {
  const fs::path dir = scratch_dir("tok_hint");
  const fs::path qwen = fs::path(TITAN_SOURCE_DIR) / "../shared/assets/qwen3-tokenizer";
  ASSERT_TRUE(fs::exists(qwen / "tokenizer.json"));
  fs::copy_file(qwen / "tokenizer.json", dir / "tokenizer.json");
  fs::copy_file(qwen / "tokenizer_config.json", dir / "tokenizer_config.json");
  fs::copy_file(fs::path(TITAN_SOURCE_DIR) / "tests/fixtures/hf/untied_gqa2/config.json", dir / "config.json");
  const CommandResult r = run_titan("train --config qwen3_debug --training.steps 1 --model.hf_assets_path " +
                                    dir.string() + " --job.dump_folder " + (dir / "out").string() +
                                    " --training.dataset_path " + kShakespeare.string());
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("tokens but model 'debug' has vocab_size 2048. HINT: to train the model of that folder "
                          "(its config.json), pass --model.name= (empty)"), std::string::npos) << r.output;
  fs::remove_all(dir);
}

// Sizes no machine here holds are refused before anything is allocated (exit 2, the error the
// last line), naming the field to lower: by the config's bounds (no model has 1e6 layers, no
// micro-batch 2^31 tokens) or by the memory check; a config.json with a vocabulary of 1e12 names the vocabulary.
TEST(CliTrainConfig, ImpossibleSizesAreRefusedBeforeAllocating) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--model.n_layers 1000000", "model.n_layers=1000000 is more than 4096 layers"},  // config validation
      {"--model.name 32B", "pick a smaller model.name"},
      {"--model.name debug_moe --model.num_experts 100000", "HINT: lower model.num_experts"},
      {"--model.n_layers 4000", "HINT: lower model.n_layers"},  // the memory check
      {"--training.local_batch_size 100000000", "training.local_batch_size=100000000 x seq_len=256 is more than 2^31"},
      {"--training.local_batch_size 1000000", "HINT: lower training.local_batch_size"},
      // 14 adapted projections of rank 1e8: terabytes of adapters, gradients and moments
      {"--lora.rank 100000000", "HINT: lower lora.rank"}};
  for (const auto& [args, hint] : cases) {
    const CommandResult r = run_titan("train --config qwen3_debug --training.steps 1 " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    const size_t error = r.output.find("titan: error: ");
    EXPECT_NE(error, std::string::npos) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(hint, error), std::string::npos) << args << "\n" << r.output;
    EXPECT_EQ(r.output.find('\n', error), r.output.size() - 1) << "the error is the last line\n" << r.output;
  }
  const fs::path dir = scratch_dir("vocab");
  nlohmann::json config = nlohmann::json::parse(read_text(fs::path(TITAN_SOURCE_DIR) / "tests/fixtures/hf/untied_gqa2/config.json"));
  config["vocab_size"] = 1000000000000LL;
  { std::ofstream(dir / "config.json") << config.dump(2); }
  const CommandResult r = run_titan("train --config qwen3_debug --training.steps 1 --training.seq_len 64 --model.name= "
                                    "--model.hf_assets_path " + dir.string() + " --job.dump_folder " + (dir / "out").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("HINT: the vocabulary holds most of it"), std::string::npos) << r.output;
  // 1e9 layers: refused naming config.json's field, before any per-layer structure exists.
  config["vocab_size"] = 1000;
  config["num_hidden_layers"] = 1000000000;
  { std::ofstream(dir / "config.json") << config.dump(2); }
  const CommandResult deep = run_titan("train --config qwen3_debug --training.steps 1 --training.seq_len 64 --model.name= "
                                       "--model.hf_assets_path " + dir.string() + " --job.dump_folder " + (dir / "out").string());
  EXPECT_EQ(deep.exit_code, 2) << deep.output;
  EXPECT_NE(deep.output.find("HINT: lower num_hidden_layers in " + dir.string() + "/config.json"), std::string::npos)
      << deep.output;
  EXPECT_FALSE(fs::exists(dir / "out")) << "a refused run leaves no dump folder (nor its lock) behind";
  fs::remove_all(dir);
}

// A dump folder another process holds (here flock(1), as a running titan train holds it) is
// refused with exit 2 before anything is written into it.
TEST(CliTrainConfig, ABusyDumpFolderIsRefused) {
  const fs::path dir = scratch_dir("busy");
  fs::create_directories(dir / "run");
  const std::string lock = (dir / "run" / ".titan.lock").string();
  testing::run_command("flock " + lock + " sh -c '" + std::string(TITAN_BINARY) +
                                                  " train --config qwen3_debug --training.steps 1 --job.dump_folder " +
                                                  (dir / "run").string() + " > " + (dir / "out.txt").string() +
                                                  " 2>&1; echo $? > " + (dir / "code.txt").string() + "'");
  EXPECT_EQ(read_text(dir / "code.txt"), "2\n") << read_text(dir / "out.txt");
  EXPECT_NE(read_text(dir / "out.txt").find("is in use by another titan train"), std::string::npos)
      << read_text(dir / "out.txt");
  EXPECT_FALSE(fs::exists(dir / "run" / "config.toml"));
  fs::remove_all(dir);
}

TEST(CliTrainConfig, BadMixtureOfExpertsSettingsAreOneLineErrors) {
  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases = {
      {"--model.name debug_moe --model.top_k 9", "num_experts_per_tok (top_k) = 9 must be in [1, num_experts = 8]"},
      {"--model.name debug_moe --model.top_k 4 --model.num_experts 2", "top_k) = 4 must be in [1, num_experts = 2]"},
      {"--model.num_experts 8", "is dense"},
  };
  for (const Case& c : cases) {
    const CommandResult r = run_titan("train --config qwen3_debug --job.dump_folder " +
                                      (fs::temp_directory_path() / "titan_moe_errors").string() + " " + c.args);
    EXPECT_NE(r.exit_code, 0) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.args << "\n" << r.output;
    const size_t error = r.output.find("titan: error: ");  // after the startup log lines
    ASSERT_NE(error, std::string::npos) << r.output;
    EXPECT_EQ(std::count(r.output.begin() + static_cast<std::ptrdiff_t>(error), r.output.end(), '\n'), 1)
        << c.args << "\n" << r.output;
    EXPECT_FALSE(fs::exists(fs::temp_directory_path() / "titan_moe_errors" / "config.toml")) << "failed before any work";
  }
  fs::remove_all(fs::temp_directory_path() / "titan_moe_errors");
}

TEST(CliTrainConfig, ConfigsListsTheRegisteredFunctions) {
  const CommandResult r = run_titan("configs");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* name : {"qwen3_debug", "qwen3_0_6b", "qwen3_1_7b", "qwen3_4b", "qwen3_8b", "qwen3_14b", "qwen3_32b"}) {
    EXPECT_NE(r.output.find(name), std::string::npos) << name;
  }
}

// --print-config prints the resolved config as TOML; fed back as a job file it resolves to itself,
// and CLI flags still win over the file.
TEST(CliTrainConfig, PrintConfigRoundTripsThroughAJobFile) {
  const fs::path dir = scratch_dir("print_config");
  const CommandResult a = run_titan("train --config qwen3_0_6b --training.steps 7 --optimizer.lr=0.00123 "
                                    "--no-metrics.enable_jsonl --print-config", /*with_stderr=*/false);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find("steps = 7"), std::string::npos) << a.output;
  std::ofstream(dir / "job.toml") << a.output;
  const CommandResult b = run_titan("train --config qwen3_debug --job.config_file " + (dir / "job.toml").string() +
                                    " --print-config", false);
  ASSERT_EQ(b.exit_code, 0) << b.output;
  // config_file is the one field that differs: it names the file just read.
  auto without_config_file = [](const std::string& toml) {
    std::istringstream in(toml);
    std::string out;
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("config_file", 0) != 0) out += line + "\n";
    }
    return out;
  };
  EXPECT_EQ(without_config_file(b.output), without_config_file(a.output));
  const CommandResult c = run_titan("train --config qwen3_debug --training.steps 9 --job.config_file " +
                                    (dir / "job.toml").string() + " --print-config", false);
  EXPECT_NE(c.output.find("steps = 9"), std::string::npos) << c.output;
  fs::remove_all(dir);
}

// titan plan shows the support matrix (train/support.h), marks a layout titan train would refuse, and
// never recommends it: with LoRA dropout on 2 ranks, tp = 2 is listed but FSDP is the recommendation.
TEST(CliPlan, MarksAndNeverRecommendsWhatTitanTrainRefuses) {
  const CommandResult r = run_titan("plan --config qwen3_debug --world-size 2 --lora.rank 4 --lora.dropout 0.1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("not run yet: LoRA dropout with tensor parallelism"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("recommended: --parallelism.data_parallel_replicate_degree 1 "
                          "--parallelism.data_parallel_shard_degree 2 --parallelism.tensor_parallel_degree 1"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("    LoRA dropout with tensor parallelism: "), std::string::npos) << r.output;  // listed, not hit
  // The config's own degrees hit the rule: marked in the matrix, and titan train refuses it (exit 2).
  const std::string tp = " --config qwen3_debug --lora.rank 4 --lora.dropout 0.1 --parallelism.tensor_parallel_degree 2";
  const CommandResult hit = run_titan("plan --world-size 2" + tp);
  ASSERT_EQ(hit.exit_code, 0) << hit.output;
  EXPECT_NE(hit.output.find("  * LoRA dropout with tensor parallelism: "), std::string::npos) << hit.output;
  const CommandResult train = run_titan("train --training.steps 1" + tp);
  EXPECT_EQ(train.exit_code, 2) << train.output;
  EXPECT_NE(train.output.find("LoRA dropout is not tensor-parallel yet"), std::string::npos) << train.output;
}

}  // namespace
}  // namespace titan
