// The `titan generate` command end to end (the binary, as a user runs it): greedy ids identical to
// Hugging Face generate() on the tiny dense, tied and MoE fixtures (a batch of left-padded prompts,
// EOS per row, padding after it: tools/make_generate_fixtures.py), seeded sampling reproducible,
// text prompts through a tokenizer, a checkpoint step folder, and one-line errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "integration/cli_runner.h"
#include "ops/op_harness.h"
#include "titan/checkpoint/safetensors.h"

namespace titan {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::run_titan;
using testing::scratch_dir;

// A model folder: the HF fixture's config.json + model.safetensors and the generation fixture's
// generation_config.json (its EOS and pad ids).
fs::path model_folder(const fs::path& tmp, const std::string& model, const std::string& case_name) {
  const fs::path dir = tmp / case_name;
  fs::create_directories(dir);
  const fs::path src = testing::source_path("tests/fixtures/" + model);
  fs::copy_file(src / "config.json", dir / "config.json");
  fs::copy_file(src / "model.safetensors", dir / "model.safetensors");
  fs::copy_file(testing::source_path("tests/fixtures/generate/" + case_name + "/generation_config.json"),
                dir / "generation_config.json");
  return dir;
}

std::vector<int64_t> ids_in(const fs::path& file) {
  const Tensor t = ckpt::SafetensorsFile::open(file.string()).get("output_ids");
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
}

struct Fixture {
  const char* model;
  const char* name;
};
class CliGenerateParity : public ::testing::TestWithParam<Fixture> {};

TEST_P(CliGenerateParity, GreedyIdsEqualTransformersGenerate) {
  const fs::path tmp = scratch_dir("generate_parity");
  const fs::path dir = model_folder(tmp, GetParam().model, GetParam().name);
  const std::string fixture = testing::source_path(std::string("tests/fixtures/generate/") + GetParam().name);
  const fs::path out = tmp / "out.safetensors";
  const CommandResult run = run_titan("generate --model " + dir.string() + " --tokens " + fixture +
                                      "/tokens.safetensors --out " + out.string() + " --max-new-tokens 12 --temperature 0");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const Tensor got = ckpt::SafetensorsFile::open(out.string()).get("output_ids");
  const Tensor want = ckpt::SafetensorsFile::open(fixture + "/expected.safetensors").get("output_ids");
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_EQ(ids_in(out), std::vector<int64_t>(want.data<int64_t>(), want.data<int64_t>() + want.numel()));
  fs::remove_all(tmp);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CliGenerateParity,
                         ::testing::Values(Fixture{"hf/untied_gqa2", "untied_gqa2"}, Fixture{"hf/tied_mha", "tied_mha"},
                                           Fixture{"hf_moe/e8_top2_norm", "moe_e8_top2_norm"},
                                           Fixture{"hf_qwen3_5/text", "qwen3_5_text"}),
                         [](const auto& info) { return std::string(info.param.name); });

// The same seed gives the same tokens, in f32 and bf16; another seed other tokens; top-k 1 is greedy.
TEST(CliGenerate, SamplingIsSeededAndTopK1IsGreedy) {
  const fs::path tmp = scratch_dir("generate_sampling");
  const fs::path dir = model_folder(tmp, "hf/untied_gqa2", "untied_gqa2");
  const std::string tokens = testing::source_path("tests/fixtures/generate/untied_gqa2/tokens.safetensors");
  auto gen = [&](const std::string& flags, const std::string& name) {
    const fs::path out = tmp / (name + ".safetensors");
    const CommandResult run = run_titan("generate --model " + dir.string() + " --tokens " + tokens + " --out " +
                                        out.string() + " --max-new-tokens 12 " + flags);
    EXPECT_EQ(run.exit_code, 0) << run.output;
    return ids_in(out);
  };
  const std::string sample = "--temperature 1.5 --top-k 50 --top-p 0.95 ";
  EXPECT_EQ(gen(sample + "--seed 7", "a"), gen(sample + "--seed 7", "b"));
  EXPECT_NE(gen(sample + "--seed 7", "c"), gen(sample + "--seed 8", "d"));
  EXPECT_EQ(gen(sample + "--seed 7 --mixed-precision bfloat16", "e"),
            gen(sample + "--seed 7 --mixed-precision bfloat16", "f"));
  EXPECT_EQ(gen("--temperature 0.8 --top-k 1 --seed 3", "g"), gen("--temperature 0", "h"));
  fs::remove_all(tmp);
}

// Text in, text out: a tokenizer trained by titan next to the 301-token fixture model; one prompt
// is streamed, a batch printed row by row; the ids of --out match a --tokens run on the same ids.
TEST(CliGenerate, PromptsAreTokenizedAndCompletionsPrinted) {
  const fs::path tmp = scratch_dir("generate_prompt");
  const fs::path dir = model_folder(tmp, "hf/untied_gqa2", "untied_gqa2");
  CommandResult run = run_titan("train-tokenizer --dataset quickstart --vocab-size 290 --out " + (tmp / "tok").string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  fs::copy_file(tmp / "tok" / "tokenizer.json", dir / "tokenizer.json");
  run = run_titan("generate --model " + dir.string() + " --prompt 'The model' --max-new-tokens 6 --out " +
                      (tmp / "one.safetensors").string(), /*with_stderr=*/false);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_FALSE(run.output.empty());
  run = run_titan("generate --model " + dir.string() + " --prompt 'The model' --prompt 'a longer prompt, with words'"
                  " --max-new-tokens 6 --out " + (tmp / "two.safetensors").string(), false);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("[0] The model"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("[1] a longer prompt, with words"), std::string::npos) << run.output;
  // Row 0 of the batch (left-padded) generates what the prompt generates alone.
  const std::vector<int64_t> one = ids_in(tmp / "one.safetensors"), two = ids_in(tmp / "two.safetensors");
  const Tensor two_t = ckpt::SafetensorsFile::open((tmp / "two.safetensors").string()).get("output_ids");
  const int64_t L = two_t.size(1), n1 = static_cast<int64_t>(one.size());
  ASSERT_LE(n1, L);
  EXPECT_EQ(std::vector<int64_t>(two.begin() + (L - n1), two.begin() + L), one);
  fs::remove_all(tmp);
}

// A folder whose tokenizer.json has a TemplateProcessing post-processor (as Llama's): each
// --prompt starts with its special token, as HF's tokenizer(prompt) gives it to generate().
TEST(CliGenerate, PromptsGetTheFoldersSpecialTokens) {
  const fs::path tmp = scratch_dir("generate_special");
  const fs::path dir = model_folder(tmp, "hf/untied_gqa2", "untied_gqa2");
  CommandResult run = run_titan("train-tokenizer --dataset quickstart --vocab-size 290 --out " + (tmp / "tok").string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  fs::copy_file(tmp / "tok" / "tokenizer.json", dir / "tokenizer.json");
  const std::string cmd = "generate --model " + dir.string() + " --prompt 'The model' --max-new-tokens 1 --out ";
  run = run_titan(cmd + (tmp / "plain.safetensors").string(), false);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::ifstream in(tmp / "tok" / "tokenizer.json");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json spec = nlohmann::json::parse(text.str());
  const int64_t bos = spec["added_tokens"][0]["id"].get<int64_t>();  // <|endoftext|>
  const std::string name = spec["added_tokens"][0]["content"].get<std::string>();
  spec["post_processor"] = {{"type", "TemplateProcessing"},
                            {"single", {{{"SpecialToken", {{"id", name}, {"type_id", 0}}}},
                                        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
                            {"pair", {{{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                      {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
                            {"special_tokens", {{name, {{"id", name}, {"ids", {bos}}, {"tokens", {name}}}}}}};
  std::ofstream(dir / "tokenizer.json", std::ios::trunc) << spec.dump();
  run = run_titan(cmd + (tmp / "bos.safetensors").string(), false);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::vector<int64_t> plain = ids_in(tmp / "plain.safetensors"), with_bos = ids_in(tmp / "bos.safetensors");
  ASSERT_EQ(with_bos.size(), plain.size() + 1);
  EXPECT_EQ(with_bos[0], bos);
  // The prompt's own ids follow (the generated token may differ: the model saw another prefix).
  EXPECT_EQ(std::vector<int64_t>(with_bos.begin() + 1, with_bos.end() - 1),
            std::vector<int64_t>(plain.begin(), plain.end() - 1));
  fs::remove_all(tmp);
}

// --chat renders each prompt as a user turn with the folder's chat template (ChatML here) and
// add_generation_prompt: the ids equal those of the rendered text given as the prompt.
TEST(CliGenerate, ChatPromptsAreRenderedWithTheFoldersTemplate) {
  const fs::path tmp = scratch_dir("generate_chat");
  const fs::path dir = model_folder(tmp, "hf/untied_gqa2", "untied_gqa2");
  CommandResult run = run_titan("train-tokenizer --dataset quickstart --vocab-size 290 --out " + (tmp / "tok").string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  fs::copy_file(tmp / "tok" / "tokenizer.json", dir / "tokenizer.json");
  const std::string chatml = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content']"
                             " + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
                             "{{ '<|im_start|>assistant\\n' }}{% endif %}";
  std::ofstream(dir / "tokenizer_config.json") << nlohmann::json{{"chat_template", chatml}}.dump();
  run = run_titan("generate --model " + dir.string() + " --chat --prompt 'hello there' --max-new-tokens 5 --out " +
                  (tmp / "chat.safetensors").string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // The rendered text as a plain prompt (printf keeps the newlines; the X keeps $(...) from eating the last one).
  run = testing::run_command("p=\"$(printf '<|im_start|>user\\nhello there<|im_end|>\\n<|im_start|>assistant\\nX')\"; "
                             "p=\"${p%X}\"; " + std::string(TITAN_BINARY) + " generate --model " + dir.string() +
                             " --prompt \"$p\" --max-new-tokens 5 --out " + (tmp / "plain.safetensors").string() + " 2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(ids_in(tmp / "chat.safetensors"), ids_in(tmp / "plain.safetensors"));
  EXPECT_GT(ids_in(tmp / "chat.safetensors").size(), 12u);  // the template's tokens are in the prompt
  fs::remove_all(tmp);
}

// --adapter applies a PEFT adapter (fixtures/lora, made by PEFT) to the HF folder: the output
// differs from the base model's and is reproducible.
TEST(CliGenerate, AdapterChangesTheModel) {
  const fs::path tmp = scratch_dir("generate_adapter");
  const std::string base = std::string(TITAN_SOURCE_DIR) + "/tests/fixtures/hf/untied_gqa2";
  const std::string adapter = std::string(TITAN_SOURCE_DIR) + "/tests/fixtures/lora/dense_all_linear/adapter";
  const std::string common = " --tokens " + base + "/tokens.safetensors --max-new-tokens 12 --out ";
  CommandResult run = run_titan("generate --model " + base + common + (tmp / "base.safetensors").string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  run = run_titan("generate --model " + base + " --adapter " + adapter + common + (tmp / "lora.safetensors").string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("[adapter] "), std::string::npos) << run.output;
  EXPECT_NE(ids_in(tmp / "base.safetensors"), ids_in(tmp / "lora.safetensors"));
  fs::remove_all(tmp);
}

// A checkpoint step folder generates what the same run's HF export generates (the model rebuilt
// from the step's config.toml, the tokenizer from the run's model.hf_assets_path). The debug
// model's 2,048 rows exceed the 300-token tokenizer: ids it lacks print no text, as in HF.
TEST(CliGenerate, CheckpointStepFolderEqualsItsHfExport) {
  const fs::path tmp = scratch_dir("generate_step");
  CommandResult run = run_titan("train-tokenizer --dataset quickstart --vocab-size 300 --out " + (tmp / "tok").string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  run = run_titan("train --config qwen3_debug --job.dump_folder " + (tmp / "run").string() + " --model.hf_assets_path " +
                  (tmp / "tok").string() + " --training.steps 2 --training.local_batch_size 1 --training.seq_len 32"
                  " --model.n_layers 1 --checkpoint.enable --checkpoint.interval 2 --checkpoint.last_save_in_hf"
                  " --metrics.peak_tflops 1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (const char* what : {"step-2", "hf"}) {
    run = run_titan("generate --model " + (tmp / "run" / "checkpoint" / what).string() + " --prompt 'The model'" +
                    " --prompt 'a longer prompt' --max-new-tokens 8 --out " + (tmp / (std::string(what) + ".st")).string());
    ASSERT_EQ(run.exit_code, 0) << run.output;
  }
  EXPECT_EQ(ids_in(tmp / "step-2.st"), ids_in(tmp / "hf.st"));
  fs::remove_all(tmp);
}

TEST(CliGenerate, BadInputsAreOneLineErrors) {
  const fs::path tmp = scratch_dir("generate_errors");
  const fs::path dir = model_folder(tmp, "hf/untied_gqa2", "untied_gqa2");
  const std::string tokens = testing::source_path("tests/fixtures/generate/untied_gqa2/tokens.safetensors");
  // An earlier output of titan's (the only kind it may replace) that no failed run may touch.
  const fs::path keep = tmp / "keep.safetensors";
  ASSERT_EQ(run_titan("generate --model " + dir.string() + " --tokens " + tokens + " --max-new-tokens 1 --out " +
                      keep.string()).exit_code, 0);
  const std::string precious = testing::read_text(keep);
  auto fails = [&](const std::string& flags, int code, const std::string& says) {
    const CommandResult run = run_titan("generate " + flags);
    EXPECT_EQ(run.exit_code, code) << flags << "\n" << run.output;
    EXPECT_NE(run.output.find(says), std::string::npos) << flags << "\n" << run.output;
  };
  const std::string model = "--model " + dir.string() + " ";
  const std::string io = "--tokens " + tokens + " --out " + keep.string() + " ";
  fails(model + io + "--max-new-tokens 0", 2, "--max-new-tokens 0 must be at least 1");
  fails("--model " + (tmp / "missing").string() + " " + io + "--max-new-tokens 2", 1, "is neither a folder nor a GGUF file");
  fails(model + io + "--max-new-tokens 200", 1, "exceed the model's context of 128");
  fails(model + "--max-new-tokens 2 --prompt hi", 1, "no tokenizer.json");
  fails(model + "--max-new-tokens 2", 2, "--prompt TEXT (repeatable) or --tokens FILE");
  fails(model + "--tokens " + tokens + " --max-new-tokens 2", 2, "--tokens needs --out");
  fails(model + io + "--max-new-tokens 2 --top-p 0", 2, "--top-p must be in (0, 1]");
  // A prompt longer than the context, and an id outside the vocabulary.
  Tensor ids = Tensor::zeros({1, 129}, DType::i64);
  ckpt::write_safetensors((tmp / "long.safetensors").string(), {{"input_ids", ids}});
  fails(model + "--tokens " + (tmp / "long.safetensors").string() + " --out " + keep.string() + " --max-new-tokens 1",
        1, "the prompt has 129 tokens, more than the model's context of 128");
  Tensor bad = Tensor::zeros({1, 3}, DType::i64);
  bad.data<int64_t>()[2] = 301;
  ckpt::write_safetensors((tmp / "bad.safetensors").string(), {{"input_ids", bad}});
  fails(model + "--tokens " + (tmp / "bad.safetensors").string() + " --out " + keep.string() + " --max-new-tokens 1",
        1, "input_ids[0, 2] = 301 is outside the vocabulary [0, 301)");
  EXPECT_EQ(testing::read_text(keep), precious);
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace titan
