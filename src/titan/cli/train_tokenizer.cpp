// titan train-tokenizer: trains a byte-level BPE tokenizer (Qwen3's pre-tokenizer, one special token
// "<|endoftext|>") on text files and writes DIR/tokenizer.json and DIR/tokenizer_config.json, each
// atomically (tmp + rename). Inputs by suffix: .txt is one document, .jsonl / .json one "text" field
// per line (DocumentSource; .zst and folders work too). --input takes several paths and may repeat;
// --dataset NAME trains on a dataset built into the binary (data/builtin_datasets.h) instead.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "titan/checkpoint/atomic_file.h"
#include "titan/checkpoint/json_file.h"
#include "titan/cli/args.h"
#include "titan/cli/commands.h"
#include "titan/core/progress.h"
#include "titan/data/builtin_datasets.h"
#include "titan/data/dataset.h"
#include "titan/data/tokenizer/trainer.h"

namespace titan::cli {
namespace {

// Takes every "--input A B ..." / "--input=A" out of argv (Args keeps one value per flag); the rest
// goes to Args.
std::vector<std::string> take_inputs(int argc, char** argv, std::vector<char*>& rest) {
  std::vector<std::string> inputs;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i >= 2 && arg.rfind("--input=", 0) == 0) {
      inputs.push_back(arg.substr(std::strlen("--input=")));
    } else if (i >= 2 && arg == "--input") {
      while (i + 1 < argc && std::strncmp(argv[i + 1], "--", 2) != 0) inputs.emplace_back(argv[++i]);
    } else {
      rest.push_back(argv[i]);
    }
  }
  return inputs;
}

// "" when `out` may receive tokenizer.json and tokenizer_config.json: titan replaces only what it
// wrote. The folder may hold anything else (a model's weights waiting for a tokenizer), but a
// tokenizer there must be an earlier train-tokenizer output: a tokenizer_config.json of exactly
// the keys titan writes (a published one has a chat template, special tokens of its own, ...).
// Else: why not.
std::string output_problem(const std::string& out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path config = fs::path(out) / "tokenizer_config.json";
  const bool has_config = fs::exists(fs::symlink_status(config, ec));
  if (!has_config) {
    const bool has_tokenizer = fs::exists(fs::symlink_status(fs::path(out) / "tokenizer.json", ec));
    return has_tokenizer ? "holds a tokenizer.json that titan train-tokenizer did not write" : "";
  }
  nlohmann::json existing;
  try {
    existing = ckpt::read_json_file(config.string());
  } catch (const Error&) {
    return "holds a tokenizer_config.json that titan cannot read, so did not write";
  }
  const nlohmann::json ours = nlohmann::json::parse(data::TrainedBpe{}.tokenizer_config_json(1));
  bool same_keys = existing.is_object() && existing.size() == ours.size();
  for (const auto& item : ours.items()) same_keys = same_keys && existing.contains(item.key());
  return same_keys ? "" : "holds a tokenizer_config.json that titan train-tokenizer did not write";
}

}  // namespace

int run_train_tokenizer(int argc, char** argv) {
  std::vector<char*> rest;
  const std::vector<std::string> inputs = take_inputs(argc, argv, rest);
  const Args args("train-tokenizer",
                  {{"input", "text files (.txt: one document; .jsonl: a \"text\" field per line); several "
                             "paths, or repeat the flag", ""},
                   {"dataset", "a built-in dataset instead of --input files ('quickstart': titan's own docs and sources)",
                    ""},
                   {"vocab-size", "tokens in all, the special token <|endoftext|> included (>= 257)", "", false, true},
                   {"out", "folder for tokenizer.json and tokenizer_config.json (created if missing)", "", false,
                    true},
                   {"model-max-length", "model_max_length in tokenizer_config.json", "131072"}},
                  static_cast<int>(rest.size()), rest.data(), 2);
  if (args.help_requested()) {
    std::fputs(args.usage().c_str(), stdout);
    return 0;
  }
  const std::string dataset = args.get("dataset");
  if (inputs.empty() == dataset.empty()) {
    throw UsageError(inputs.empty() ? "titan train-tokenizer: missing --input (text files to train on) or --dataset NAME"
                                    : "titan train-tokenizer: give --input files or --dataset, not both");
  }
  if (!dataset.empty()) data::builtin_dataset_text(dataset);  // an unknown name fails before any work
  const int64_t vocab_size = args.get_int("vocab-size");
  data::BpeTrainer trainer(vocab_size);  // checks the range before any reading
  const int64_t model_max_length = args.get_int("model-max-length");
  if (model_max_length <= 0) {
    throw UsageError(str("titan train-tokenizer: --model-max-length must be positive, got ", model_max_length));
  }

  for (const std::string& input : inputs) {
    TITAN_CHECK(std::filesystem::exists(input), "[train-tokenizer] input ", input,
                " does not exist. HINT: --input takes text files (.txt, .jsonl)");
  }
  // Check the output folder before the work, not after it.
  const std::string out = args.get("out");
  if (const std::string problem = output_problem(out); !problem.empty()) {
    throw UsageError(str("titan train-tokenizer: --out ", out, " ", problem,
                         "; its files would be replaced. HINT: pass a new or empty --out folder"));
  }
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  TITAN_CHECK(!ec && std::filesystem::is_directory(out), "[train-tokenizer] cannot create the output folder ", out,
              ": ", ec ? ec.message() : "a file is in the way", ". HINT: pass a writable --out folder");
  TITAN_CHECK(::access(out.c_str(), W_OK) == 0, "[train-tokenizer] output folder ", out,
              " is not writable: ", std::strerror(errno), ". HINT: pass a writable --out folder");

  const auto start = std::chrono::steady_clock::now();
  Progress reading("reading", 0, "documents");
  for (const std::string& input : inputs) {
    data::DatasetConfig config;
    config.path = input;
    data::DocumentSource source(config);
    while (std::optional<data::Document> doc = source.next()) {
      trainer.add_text(doc->text, input);
      reading.advance();
    }
  }
  if (!dataset.empty()) trainer.add_text(data::builtin_dataset_text(dataset), "built-in dataset " + dataset);
  reading.done();
  const data::TrainedBpe bpe = trainer.train();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const std::filesystem::path dir(out);
  ckpt::write_text_file_atomic((dir / "tokenizer.json").string(), bpe.tokenizer_json());
  ckpt::write_text_file_atomic((dir / "tokenizer_config.json").string(),
                               bpe.tokenizer_config_json(model_max_length));
  const int64_t total = static_cast<int64_t>(bpe.tokens.size()) + 1;
  std::fprintf(stderr, "[train-tokenizer] %lld pieces, %lld distinct; %lld merges, vocab %lld in %.2f s -> %s\n",
               static_cast<long long>(bpe.num_pieces), static_cast<long long>(bpe.num_words),
               static_cast<long long>(bpe.merges.size()), static_cast<long long>(total), seconds,
               (dir / "tokenizer.json").c_str());
  if (total < vocab_size) {
    std::fprintf(stderr, "[train-tokenizer] warning: the corpus ran out of pairs; vocab is %lld, not %lld\n",
                 static_cast<long long>(total), static_cast<long long>(vocab_size));
  }
  return 0;
}

}  // namespace titan::cli
