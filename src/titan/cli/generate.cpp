// titan generate: autoregressive generation with a KV cache (nn/generate.h) from a Hugging Face
// folder or a checkpoint step folder (model_source.h). Token ids in and out (--tokens / --out,
// safetensors), or text (--prompt, repeatable: a batch of prompts, left-padded as HF pads them)
// with the completion streamed to stdout as it is produced. Stops per row at the folder's EOS ids.
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "titan/checkpoint/safetensors.h"
#include "titan/cli/args.h"
#include "titan/cli/commands.h"
#include "titan/cli/output_file.h"
#include "titan/cli/model_source.h"
#include "titan/core/clock.h"
#include "titan/core/log.h"
#include "titan/data/chat_template.h"
#include "titan/data/tokenizer/special_tokens.h"
#include "titan/data/tokenizer/tokenizer.h"
#include "titan/nn/generate.h"
#include "titan/train/precision.h"

namespace titan::cli {
namespace {

namespace fs = std::filesystem;

struct Batch {
  Tensor ids_BT;                // i64, left-padded
  std::vector<int64_t> begin_B;  // first real token of each row
};

// --tokens: input_ids [B, T] and an optional attention_mask [B, T] of HF's left padding (zeros
// before the row's tokens, ones after).
Batch batch_from_file(const std::string& path) {
  const auto file = ckpt::SafetensorsFile::open(path);
  Batch batch{read_token_ids(file, "input_ids"), {}};
  const int64_t B = batch.ids_BT.size(0), T = batch.ids_BT.size(1);
  batch.begin_B.assign(static_cast<size_t>(B), 0);
  if (file.find("attention_mask") == nullptr) return batch;
  const Tensor mask = read_token_ids(file, "attention_mask");
  TITAN_CHECK(mask.shape() == batch.ids_BT.shape(), path, ": attention_mask ", mask.describe(),
              " must have the shape of input_ids ", batch.ids_BT.describe());
  for (int64_t b = 0; b < B; ++b) {
    const int64_t* m = mask.data<int64_t>() + b * T;
    int64_t begin = 0;
    while (begin < T && m[begin] == 0) ++begin;
    for (int64_t t = begin; t < T; ++t) {
      TITAN_CHECK(m[t] == 1, path, ": attention_mask row ", b, " is not left padding (zeros, then ones) at position ", t,
                  ". HINT: pad prompts on the left, as HF generate expects");
    }
    TITAN_CHECK(begin < T, path, ": attention_mask row ", b, " masks every token; a prompt needs at least one");
    batch.begin_B[static_cast<size_t>(b)] = begin;
  }
  return batch;
}

// `specials`: the folder's special tokens around each prompt (BOS for Llama), as HF's
// tokenizer(prompt); none for a rendered chat template, which holds its own.
Batch batch_from_prompts(const std::vector<std::string>& prompts, const data::Tokenizer& tokenizer, int64_t pad_id,
                         const data::SequenceTokens& specials) {
  std::vector<std::vector<int32_t>> rows;
  size_t T = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<int32_t> row = specials.prefix;
    const std::vector<int32_t> ids = tokenizer.encode(prompts[i]);
    row.insert(row.end(), ids.begin(), ids.end());
    row.insert(row.end(), specials.suffix.begin(), specials.suffix.end());
    rows.push_back(std::move(row));
    if (rows.back().empty()) throw UsageError(str("titan generate: --prompt #", i + 1, " is empty (no tokens)"));
    T = std::max(T, rows.back().size());
  }
  const auto B = static_cast<int64_t>(rows.size());
  Batch batch{Tensor::empty({B, static_cast<int64_t>(T)}, DType::i64), {}};
  for (int64_t b = 0; b < B; ++b) {
    const auto& row = rows[static_cast<size_t>(b)];
    const int64_t begin = static_cast<int64_t>(T - row.size());
    int64_t* out = batch.ids_BT.data<int64_t>() + b * static_cast<int64_t>(T);
    std::fill(out, out + begin, pad_id);
    std::copy(row.begin(), row.end(), out + begin);
    batch.begin_B.push_back(begin);
  }
  return batch;
}

// Streams row 0's completion: decodes everything generated so far and prints the new bytes (a
// token may end inside a UTF-8 character; decoding the whole completion keeps that right).
class TextStream {
 public:
  TextStream(const data::Tokenizer& tokenizer, const std::vector<int64_t>& eos_ids) : tok_(tokenizer), eos_(eos_ids) {}
  void add(int64_t id) {
    if (done_ || std::find(eos_.begin(), eos_.end(), id) != eos_.end()) {
      done_ = true;
      return;
    }
    if (id >= tok_.vocab_size()) return;  // a padded vocabulary row the tokenizer lacks: no text (as HF)
    ids_.push_back(static_cast<int32_t>(id));
    const std::string text = tok_.decode(ids_);
    std::fwrite(text.data() + printed_, 1, text.size() - printed_, stdout);
    std::fflush(stdout);
    printed_ = text.size();
  }

 private:
  const data::Tokenizer& tok_;
  std::vector<int64_t> eos_;
  std::vector<int32_t> ids_;
  size_t printed_ = 0;
  bool done_ = false;
};

float parse_float(const Args& args, const std::string& name) {
  const std::string text = args.get(name);
  char* end = nullptr;
  const float v = std::strtof(text.c_str(), &end);
  if (text.empty() || *end != '\0') throw UsageError(str("titan generate: --", name, " ", text, " is not a number"));
  return v;
}

// Takes every "--prompt TEXT" out of argv (Args keeps one value per flag).
std::vector<std::string> take_prompts(int& argc, char** argv) {
  std::vector<std::string> prompts;
  int kept = 2;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--prompt" || a.rfind("--prompt=", 0) == 0) {
      if (a == "--prompt") {
        if (i + 1 >= argc) throw UsageError("titan generate: --prompt needs a value");
        prompts.push_back(argv[++i]);
      } else {
        prompts.push_back(a.substr(9));
      }
      continue;
    }
    argv[kept++] = argv[i];
  }
  argc = kept;
  return prompts;
}

}  // namespace

int run_generate(int argc, char** argv) {
  const std::vector<std::string> prompts = take_prompts(argc, argv);
  const Args args(
      "generate",
      {{"model", "Hugging Face model folder (config.json + *.safetensors + tokenizer.json), a .gguf file or a checkpoint step-<N> folder",
        "", false, true},
       {"adapter", "PEFT LoRA adapter folder to apply on an HF model (adapter_config.json + adapter_model.safetensors)", ""},
       {"prompt", "text to continue (repeat for a batch); the completion of a single prompt is streamed to stdout", ""},
       {"chat", "each --prompt is a user message, rendered with the folder's chat template (generation prompt added)",
        "", true},
       {"tokens", "safetensors file with input_ids [B, T] (I64/I32) and optionally attention_mask [B, T] "
                  "(left padding: 0 before a row's tokens)", ""},
       {"out", "write output_ids [B, T + n] (I64) here (required with --tokens)", ""},
       {"max-new-tokens", "generate at most this many tokens per row (>= 1)", "", false, true},
       {"temperature", "0: greedy; > 0: sample from softmax(logits / temperature) (greedy where a tiny temperature "
                       "makes logits / temperature overflow)", "0"},
       {"top-k", "sample among the k most likely tokens (0: all)", "0"},
       {"top-p", "sample among the most likely tokens holding this probability mass (1: all)", "1"},
       {"seed", "sampling seed (the same seed, the same tokens)", "0"},
       {"mixed-precision", "compute dtype: float32 or bfloat16 (weights converted once at load)", "float32"}},
      argc, argv, 2);
  if (args.help_requested()) {
    std::fputs(args.usage().c_str(), stdout);
    std::fputs("Stops a row at the folder's eos_token_id (generation_config.json, else config.json); finished rows\n"
               "are padded with pad_token_id (else the first eos id), as HF generate does.\n", stdout);
    return 0;
  }
  if (prompts.empty() == args.get("tokens").empty()) {
    throw UsageError("titan generate: pass --prompt TEXT (repeatable) or --tokens FILE, one of the two");
  }
  if (!args.get("tokens").empty() && args.get("out").empty()) {
    throw UsageError("titan generate: --tokens needs --out for the output_ids");
  }
  if (!args.get("out").empty()) check_output_file("generate", "out", args.get("out"));
  nn::GenerateOptions options;
  options.max_new_tokens = args.get_int("max-new-tokens");
  if (options.max_new_tokens < 1) {
    throw UsageError(str("titan generate: --max-new-tokens ", options.max_new_tokens, " must be at least 1"));
  }
  options.sampling.temperature = parse_float(args, "temperature");
  options.sampling.top_k = args.get_int("top-k");
  options.sampling.top_p = parse_float(args, "top-p");
  options.sampling.seed = static_cast<uint64_t>(args.get_int("seed"));
  if (!(options.sampling.temperature >= 0.0f)) throw UsageError("titan generate: --temperature must be >= 0");
  if (options.sampling.top_k < 0) throw UsageError("titan generate: --top-k must be >= 0");
  if (!(options.sampling.top_p > 0.0f && options.sampling.top_p <= 1.0f)) {
    throw UsageError("titan generate: --top-p must be in (0, 1]");
  }
  const std::string precision = args.get("mixed-precision");
  if (precision != "float32" && precision != "bfloat16") {
    throw UsageError(str("titan generate: --mixed-precision ", precision, " is not float32 or bfloat16"));
  }
  log_startup();

  Batch batch;
  if (args.get_bool("chat") && prompts.empty()) throw UsageError("titan generate: --chat applies to --prompt text");
  LoadedModel loaded = load_inference_model(args.get("model"), args.get("adapter"));
  nn::Decoder& model = *loaded.model;
  options.eos_ids = read_eos_ids(loaded.assets_dir);
  options.pad_id = read_pad_id(loaded.assets_dir, options.eos_ids);
  std::unique_ptr<data::Tokenizer> tokenizer;
  if (!prompts.empty()) {
    TITAN_CHECK(!loaded.assets_dir.empty() && fs::exists(fs::path(loaded.assets_dir) / "tokenizer.json"), "[generate] ",
                args.get("model"), ": no tokenizer.json", loaded.assets_dir.empty() ? "" : " in ", loaded.assets_dir,
                ". HINT: --prompt needs the model's tokenizer; pass token ids with --tokens instead");
    tokenizer = std::make_unique<data::Tokenizer>(data::Tokenizer::from_file(loaded.assets_dir));
    std::vector<std::string> texts = prompts;
    data::SequenceTokens specials;  // none for chat: the rendered template holds its special tokens
    if (args.get_bool("chat")) {  // as apply_chat_template([{"role": "user", ...}], add_generation_prompt=True)
      const data::ChatTemplate chat = data::ChatTemplate::from_folder(loaded.assets_dir);
      for (std::string& text : texts) {
        text = chat.render(nlohmann::ordered_json::array({{{"role", "user"}, {"content", text}}}), true);
      }
    } else {
      specials = data::sequence_tokens_from_folder(loaded.assets_dir, *tokenizer);
    }
    batch = batch_from_prompts(texts, *tokenizer, options.pad_id, specials);
  } else {
    batch = batch_from_file(args.get("tokens"));
  }
  const int64_t B = batch.ids_BT.size(0), T = batch.ids_BT.size(1), V = model.config().vocab_size;
  const int64_t context = model.config().max_seq_len;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = batch.begin_B[static_cast<size_t>(b)]; t < T; ++t) {
      const int64_t id = batch.ids_BT.data<int64_t>()[b * T + t];
      TITAN_CHECK(id >= 0 && id < V, "[generate] input_ids[", b, ", ", t, "] = ", id,
                  " is outside the vocabulary [0, ", V, ")");
    }
  }
  TITAN_CHECK(T <= context, "[generate] the prompt has ", T, " tokens, more than the model's context of ", context,
              " positions (max_position_embeddings). HINT: shorten the prompt");
  TITAN_CHECK(options.max_new_tokens <= context - T, "[generate] ", T, " prompt tokens + --max-new-tokens ",
              options.max_new_tokens, " exceed the model's context of ", context,
              " positions (max_position_embeddings). HINT: --max-new-tokens ", context - T, " at most");
  // The weights passed the floor at load; the KV cache of the batch and the last logits join them.
  check_inference_memory(loaded, {B, T + options.max_new_tokens, 1,
                                  "the number of prompts, the prompt length or --max-new-tokens"});
  model.prepare_inference(train::compute_dtype(train::parse_precision(precision)));

  std::unique_ptr<TextStream> stream;
  if (tokenizer && B == 1) stream = std::make_unique<TextStream>(*tokenizer, options.eos_ids);
  const auto t0 = Clock::now();
  double prefill_s = 0.0;
  const Tensor out_BL = nn::generate(model, batch.ids_BT, batch.begin_B, options,
                                     [&](int64_t step, const std::vector<int64_t>& token_B, const std::vector<bool>&) {
                                       if (step == 0) prefill_s = seconds_since(t0);
                                       if (stream) stream->add(token_B[0]);
                                     });
  const double total_s = seconds_since(t0);
  const int64_t steps = out_BL.size(1) - T;
  if (stream) std::fputs("\n", stdout);
  if (tokenizer && B > 1) {
    for (int64_t b = 0; b < B; ++b) {
      std::vector<int32_t> ids;
      for (int64_t s = 0; s < steps; ++s) {
        const int64_t id = out_BL.data<int64_t>()[b * (T + steps) + T + s];
        if (std::find(options.eos_ids.begin(), options.eos_ids.end(), id) != options.eos_ids.end()) break;
        if (id < tokenizer->vocab_size()) ids.push_back(static_cast<int32_t>(id));  // as TextStream
      }
      std::printf("[%ld] %s%s\n", static_cast<long>(b), prompts[static_cast<size_t>(b)].c_str(), tokenizer->decode(ids).c_str());
    }
  }
  if (!args.get("out").empty()) {
    ckpt::write_safetensors(args.get("out"), {{"output_ids", out_BL}}, output_metadata("generate"));
  }
  log_info(str("[generate] ", B, " x ", T, " prompt tokens, ", steps, " steps: prefill ", prefill_s, " s, decode ",
               steps > 1 ? static_cast<double>(steps - 1) / (total_s - prefill_s) : 0.0, " steps/s",
               args.get("out").empty() ? "" : "; wrote " + args.get("out")));
  return 0;
}

}  // namespace titan::cli
