// `titan train` on chat data: a small chat JSONL written here, the Qwen3 tokenizer folder from
// ../shared (its own chat_template) beside a tiny Qwen3 config.json (vocab 151,936), loss only on
// assistant tokens; the loss falls, and bad chat input is one line and a non-zero exit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "integration/cli_runner.h"

namespace titan {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::read_jsonl;
using testing::run_titan;
using testing::scratch_dir;

const fs::path kQwen3Tokenizer = fs::path(TITAN_SOURCE_DIR) / "../shared/assets/qwen3-tokenizer";

void write(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

// A tiny Qwen3 (2 layers, dim 64) over the real Qwen3 vocabulary, with the real tokenizer folder's
// files: the model Transformers would build from this config.json.
fs::path make_model_dir(const fs::path& dir, bool with_template) {
  fs::create_directories(dir);
  fs::copy_file(kQwen3Tokenizer / "tokenizer.json", dir / "tokenizer.json");
  if (with_template) {
    fs::copy_file(kQwen3Tokenizer / "tokenizer_config.json", dir / "tokenizer_config.json");
  } else {
    write(dir / "tokenizer_config.json", R"({"eos_token": "<|im_end|>"})");
  }
  const nlohmann::json config = {
      {"architectures", {"Qwen3ForCausalLM"}}, {"model_type", "qwen3"}, {"hidden_size", 64},
      {"intermediate_size", 128}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
      {"num_key_value_heads", 2}, {"head_dim", 16}, {"hidden_act", "silu"}, {"max_position_embeddings", 256},
      {"rms_norm_eps", 1e-6}, {"rope_theta", 1000000.0}, {"tie_word_embeddings", true},
      {"attention_bias", false}, {"vocab_size", 151936}, {"torch_dtype", "float32"}};
  write(dir / "config.json", config.dump(2));
  return dir;
}

// Short arithmetic conversations: the assistant's answers follow one pattern a model learns fast.
std::string chat_jsonl(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    const int a = i % 7 + 1, b = i % 5 + 2;
    nlohmann::json messages = nlohmann::json::array();
    if (i % 2 == 0) messages.push_back({{"role", "system"}, {"content", "You add numbers."}});
    messages.push_back({{"role", "user"}, {"content", "What is " + std::to_string(a) + " plus " + std::to_string(b) + "?"}});
    messages.push_back({{"role", "assistant"},
                        {"content", std::to_string(a) + " plus " + std::to_string(b) + " is " + std::to_string(a + b) + "."}});
    out += nlohmann::json{{"messages", messages}}.dump() + "\n";
  }
  return out;
}

std::string train_args(const fs::path& model, const fs::path& data, const fs::path& out, const std::string& extra) {
  return "train --config qwen3_debug --model.name= --model.hf_assets_path " + model.string() +
         " --training.dataset_path " + data.string() + " --training.dataset_format chat --job.dump_folder " +
         out.string() + " --metrics.peak_tflops 1 " + extra;
}

TEST(CliChat, TrainsOnAssistantTokensAndTheLossFalls) {
  ASSERT_TRUE(fs::exists(kQwen3Tokenizer / "tokenizer_config.json")) << kQwen3Tokenizer;
  const fs::path dir = scratch_dir("chat");
  const fs::path model = make_model_dir(dir / "model", true);
  write(dir / "chat.jsonl", chat_jsonl(64));
  const CommandResult r = run_titan(train_args(model, dir / "chat.jsonl", dir / "run",
                                               "--training.steps 16 --training.local_batch_size 4 --training.seq_len 64 "
                                               "--lr_scheduler.warmup_steps 2 --optimizer.lr 3e-3 --metrics.log_freq 1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<nlohmann::json> rows = read_jsonl(dir / "run" / "metrics.jsonl");
  ASSERT_EQ(rows.size(), 16u) << r.output;
  const double first = rows.front()["loss"].get<double>();
  double last = 0.0;
  for (size_t i = rows.size() - 3; i < rows.size(); ++i) last += rows[i]["loss"].get<double>() / 3.0;
  // Untrained: about ln(151936) = 11.93 nats on every counted token.
  EXPECT_NEAR(first, std::log(151936.0), 1.0) << r.output;
  std::printf("chat loss %.4f at step 1, %.4f over steps 14-16\n", first, last);
  EXPECT_LT(last, first - 3.0) << "loss " << first << " at step 1, " << last << " over the last 3 steps\n" << r.output;
  fs::remove_all(dir);
}

// QLoRA: LoRA adapters (r 8, all linear) on a base whose linear weights are stored NF4 (bf16
// compute) learn the chat as they do on the bf16 base: the loss falls by more than 3 nats, and its
// last three steps are within 5% of the bf16 base's. The merged HF export decodes the base and
// says that it is lossy.
TEST(CliChat, QloraOnAnNf4BaseLearnsTheChat) {
  const fs::path dir = scratch_dir("chat_qlora");
  const fs::path model = make_model_dir(dir / "model", true);
  write(dir / "chat.jsonl", chat_jsonl(64));
  const std::string common = "--training.steps 24 --training.local_batch_size 4 --training.seq_len 64 "
                             "--lr_scheduler.warmup_steps 2 --optimizer.lr 1e-2 --metrics.log_freq 1 --lora.rank 8 "
                             "--training.mixed_precision_param bfloat16 ";
  double last[2] = {0.0, 0.0}, first[2] = {0.0, 0.0};
  const char* kinds[2] = {"none", "nf4"};
  for (int k = 0; k < 2; ++k) {
    const std::string extra = common + "--lora.base_quantization " + kinds[k] +
                              (k == 1 ? " --checkpoint.last_save_in_hf --checkpoint.enable" : "");
    const CommandResult r = run_titan(train_args(model, dir / "chat.jsonl", dir / kinds[k], extra));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::vector<nlohmann::json> rows = read_jsonl(dir / kinds[k] / "metrics.jsonl");
    ASSERT_EQ(rows.size(), 24u) << r.output;
    first[k] = rows.front()["loss"].get<double>();
    for (size_t i = rows.size() - 3; i < rows.size(); ++i) last[k] += rows[i]["loss"].get<double>() / 3.0;
    if (k == 1) {
      EXPECT_NE(r.output.find("its linear weights quantized nf4"), std::string::npos) << r.output;
      EXPECT_NE(r.output.find("the merged weights are its decoded values plus the adapters, lossy"),
                std::string::npos)
          << r.output;
      EXPECT_TRUE(fs::exists(dir / kinds[k] / "checkpoint" / "hf" / "config.json")) << r.output;
    }
  }
  std::printf("chat loss, bf16 base: %.4f -> %.4f; nf4 base: %.4f -> %.4f\n", first[0], last[0], first[1], last[1]);
  EXPECT_LT(last[1], first[1] - 3.0);
  EXPECT_LT(std::fabs(last[1] - last[0]) / last[0], 0.05);
  fs::remove_all(dir);
}

// The data cursor in a checkpoint carries the mask: a run resumed from step 3 trains steps 4..6
// with the same losses, to the bit, as the uninterrupted run.
TEST(CliChat, ResumeContinuesTheLossSequenceToTheBit) {
  const fs::path dir = scratch_dir("chat_resume");
  const fs::path model = make_model_dir(dir / "model", true);
  write(dir / "chat.jsonl", chat_jsonl(24));
  const std::string flags = "--training.steps 6 --training.local_batch_size 2 --training.seq_len 48 "
                            "--metrics.log_freq 1 --training.deterministic --checkpoint.enable --checkpoint.interval 3 "
                            "--lr_scheduler.warmup_steps 2";
  const CommandResult a = run_titan(train_args(model, dir / "chat.jsonl", dir / "a", flags));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  fs::create_directories(dir / "b" / "checkpoint");
  fs::copy(dir / "a" / "checkpoint" / "step-3", dir / "b" / "checkpoint" / "step-3", fs::copy_options::recursive);
  const CommandResult b = run_titan(train_args(model, dir / "chat.jsonl", dir / "b", flags));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  std::map<int, double> want;
  for (const auto& row : read_jsonl(dir / "a" / "metrics.jsonl")) want[row["step"].get<int>()] = row["loss"].get<double>();
  int resumed = 0;
  for (const auto& row : read_jsonl(dir / "b" / "metrics.jsonl")) {
    const int step = row["step"].get<int>();
    EXPECT_GE(step, 4) << b.output;
    EXPECT_EQ(row["loss"].get<double>(), want[step]) << "step " << step;
    ++resumed;
  }
  EXPECT_EQ(resumed, 3) << b.output;
  fs::remove_all(dir);
}

// A folder as Transformers 5 saves it: the template in chat_template.jinja, tokenizer_config.json
// without one (tests/fixtures/chat/folders/jinja_only). It fine-tunes with no edits, the mask on
// the assistant tokens, and the HF export carries the template file.
TEST(CliChat, TemplateInChatTemplateJinjaFineTunes) {
  const fs::path dir = scratch_dir("chat_jinja");
  const fs::path model = make_model_dir(dir / "model", false);
  const fs::path fixture = fs::path(TITAN_SOURCE_DIR) / "tests/fixtures/chat/folders/jinja_only";
  fs::copy_file(fixture / "chat_template.jinja", model / "chat_template.jinja");
  fs::copy_file(fixture / "tokenizer_config.json", model / "tokenizer_config.json", fs::copy_options::overwrite_existing);
  write(dir / "chat.jsonl", chat_jsonl(8));
  const CommandResult r = run_titan(train_args(model, dir / "chat.jsonl", dir / "run",
                                               "--training.steps 2 --training.local_batch_size 2 --training.seq_len 48 "
                                               "--metrics.log_freq 1 --checkpoint.enable --checkpoint.last_save_in_hf"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_jsonl(dir / "run" / "metrics.jsonl").size(), 2u) << r.output;
  std::ifstream exported(dir / "run" / "checkpoint" / "hf" / "chat_template.jinja");
  std::stringstream got, want;
  got << exported.rdbuf();
  want << std::ifstream(fixture / "chat_template.jinja").rdbuf();
  EXPECT_EQ(got.str(), want.str());
  fs::remove_all(dir);
}

// A published Llama-3.2-style instruct folder as Transformers 5 saves it — tokenizer.json with a
// BOS-adding TemplateProcessing, chat_template.jinja, a tokenizer_config.json without a template,
// config.json with llama3 RoPE scaling — fine-tunes on chat data with no edits to the folder, and
// its export carries the template, the tokenizer and the RoPE block unchanged. (The rendered ids
// equal apply_chat_template's: ChatTemplate.FolderLocationsRenderAsTransformers.)
TEST(CliChat, TransformersV5LlamaFolderFineTunesAsItIs) {
  const fs::path dir = scratch_dir("chat_v5");
  const fs::path model = dir / "model";
  fs::copy(fs::path(TITAN_SOURCE_DIR) / "tests/fixtures/chat/folders/llama3_v5", model, fs::copy_options::recursive);
  const nlohmann::json rope = {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 32.0},
                               {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                               {"original_max_position_embeddings", 8192}};
  const nlohmann::json config = {
      {"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"hidden_size", 64},
      {"intermediate_size", 128}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
      {"num_key_value_heads", 2}, {"head_dim", 16}, {"hidden_act", "silu"}, {"max_position_embeddings", 131072},
      {"rms_norm_eps", 1e-5}, {"rope_parameters", rope}, {"tie_word_embeddings", true},
      {"attention_bias", false}, {"mlp_bias", false}, {"vocab_size", 640}, {"bos_token_id", 0},
      {"eos_token_id", 602}, {"dtype", "float32"}};
  write(model / "config.json", config.dump(2));
  write(dir / "chat.jsonl", chat_jsonl(16));
  const CommandResult r = run_titan(train_args(model, dir / "chat.jsonl", dir / "run",
                                               "--training.steps 3 --training.local_batch_size 2 --training.seq_len 64 "
                                               "--metrics.log_freq 1 --checkpoint.enable --checkpoint.last_save_in_hf"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<nlohmann::json> rows = read_jsonl(dir / "run" / "metrics.jsonl");
  ASSERT_EQ(rows.size(), 3u) << r.output;
  for (const nlohmann::json& row : rows) EXPECT_TRUE(std::isfinite(row["loss"].get<double>())) << r.output;
  const fs::path hf = dir / "run" / "checkpoint" / "hf";
  for (const char* file : {"chat_template.jinja", "tokenizer.json", "tokenizer_config.json"}) {
    std::stringstream got, want;
    got << std::ifstream(hf / file).rdbuf();
    want << std::ifstream(model / file).rdbuf();
    EXPECT_EQ(got.str(), want.str()) << file;
  }
  std::ifstream exported(hf / "config.json");
  EXPECT_EQ(nlohmann::json::parse(exported)["rope_parameters"], rope);
  fs::remove_all(dir);
}

TEST(CliChat, BadChatInputIsOneLineAndNonZeroExit) {
  const fs::path dir = scratch_dir("chat_bad");
  const fs::path plain = make_model_dir(dir / "plain", false);
  const fs::path model = make_model_dir(dir / "model", true);
  write(dir / "chat.jsonl", chat_jsonl(4));
  const std::string small = "--training.steps 1 --training.local_batch_size 1 --training.seq_len 32";

  CommandResult r = run_titan(train_args(plain, dir / "chat.jsonl", dir / "r1", small));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("tokenizer_config.json has no \"chat_template\" and there is no chat_template.jinja"), std::string::npos) << r.output;

  write(dir / "bad.jsonl", "\n{\"messages\": [{\"role\": \"robot\", \"content\": \"hi\"}]}\n" + chat_jsonl(1));
  r = run_titan(train_args(model, dir / "bad.jsonl", dir / "r2", small));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find((dir / "bad.jsonl").string() + ":2: messages[0] has the unknown role \"robot\""),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("HINT:"), std::string::npos) << r.output;

  r = run_titan("train --config qwen3_debug --training.dataset_format chatml --training.steps 1", true);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("training.dataset_format='chatml' is not text, chat, pretokenized or auto"), std::string::npos)
      << r.output;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace titan
