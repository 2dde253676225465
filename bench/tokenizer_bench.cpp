// Tokenizer encode throughput, ours (titan::data::Tokenizer) vs Hugging Face `tokenizers` (Rust,
// through tools/bench_hf_tokenizer.py), on the same documents in the same run.
//
// Text: the files given (default: tinyshakespeare plus the ja/ru/zh background notes), read as bytes
// and concatenated. Documents: from byte offset `start`, take --chunk bytes (default 2048), then
// extend to just past the next '\n' (or the end); the peer splits identically. Modes:
//   1 thread : encode() in a loop over the documents (peer: encode, TOKENIZERS_PARALLELISM=false);
//   N threads: N std::threads take documents from a shared counter (peer: encode_batch, rayon N).
// MB/s counts 1e6 bytes of UTF-8 input per second; "cold" is the first pass of a freshly loaded
// tokenizer (empty BPE word cache) on both sides, median of 3 loads. Also times the pre-tokenizer's Split regex
// (PCRE2, JIT) alone over the same documents. Token totals must equal the peer's. Last, the packing
// loader (PrefetchLoader, B=8, T=2048, eot = <|endoftext|>) over the same documents, written to a
// temporary .jsonl: tokens/s of its producer thread (JSONL parse + encode + packing, warm cache)
// and how long the consumer waited.
//
//   build/bench/tokenizer_bench [--tokenizer tokenizer.json] [--text file]... [--threads 2]
//                               [--chunk 2048] [--repeats 5] [--no-peer]
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness.h"
#include "titan/core/error.h"
#include "titan/data/prefetch_loader.h"
#include "titan/data/tokenizer/pre_tokenizer.h"
#include "titan/data/tokenizer/tokenizer.h"

using namespace titan;

namespace {

struct Options {
  std::string tokenizer = TITAN_SOURCE_DIR "/../shared/assets/qwen3-tokenizer/tokenizer.json";
  std::vector<std::string> texts;
  int threads = 2;
  size_t chunk = 2048;
  int repeats = 5;
  bool peer = true;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      TITAN_CHECK(i + 1 < argc, "tokenizer_bench: ", a, " needs a value");
      return argv[++i];
    };
    if (a == "--tokenizer") o.tokenizer = next();
    else if (a == "--text") o.texts.push_back(next());
    else if (a == "--threads") o.threads = std::stoi(next());
    else if (a == "--chunk") o.chunk = std::stoul(next());
    else if (a == "--repeats") o.repeats = std::stoi(next());
    else if (a == "--no-peer") o.peer = false;
    else TITAN_FAIL("tokenizer_bench: unknown flag ", a, " (--tokenizer --text --threads --chunk --repeats --no-peer)");
  }
  if (o.texts.empty()) {
    const std::string shared = TITAN_SOURCE_DIR "/../shared/";
    o.texts = {shared + "assets/text/tinyshakespeare.txt", shared + "background/torchtitan-trainium-qwen3.ja.txt",
               shared + "background/torchtitan-trainium-qwen3.ru.txt",
               shared + "background/torchtitan-trainium-qwen3.zh.txt"};
  }
  TITAN_CHECK(o.threads >= 1 && o.chunk >= 1 && o.repeats >= 1,
              "tokenizer_bench: --threads, --chunk and --repeats must be >= 1");
  return o;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TITAN_CHECK(in.good(), "tokenizer_bench: cannot read ", path, "; pass --text with an existing file");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The documents, as tools/bench_hf_tokenizer.py splits them (see the top comment).
std::vector<std::string_view> split_documents(std::string_view data, size_t chunk) {
  std::vector<std::string_view> docs;
  size_t start = 0;
  while (start < data.size()) {
    const size_t newline = data.find('\n', std::min(start + chunk, data.size()));
    const size_t end = newline == std::string_view::npos ? data.size() : newline + 1;
    docs.push_back(data.substr(start, end - start));
    start = end;
  }
  return docs;
}

// The pattern of the first Split pre-tokenizer in tokenizer.json (Qwen3: the only one).
std::string split_pattern(const std::string& tokenizer_path) {
  const nlohmann::json j = nlohmann::json::parse(read_file(tokenizer_path));
  const nlohmann::json& pre = j.at("pre_tokenizer");
  const nlohmann::json steps = pre.value("type", "") == "Sequence" ? pre.at("pretokenizers") : nlohmann::json::array({pre});
  for (const nlohmann::json& step : steps) {
    if (step.value("type", "") == "Split" && step.at("pattern").contains("Regex")) {
      return step.at("pattern").at("Regex").get<std::string>();
    }
  }
  TITAN_FAIL("tokenizer_bench: ", tokenizer_path, " has no Split pre-tokenizer with a Regex pattern");
}

struct Measured {
  bench::Timing timing;
  int64_t num_tokens = 0;
};

Measured encode_all(const data::Tokenizer& tok, const std::vector<std::string_view>& docs, int threads,
                    int repeats, int warmup = 1) {
  Measured m;
  auto run = [&] {
    std::atomic<size_t> next_doc{0};
    std::atomic<int64_t> total{0};
    auto worker = [&] {
      int64_t count = 0;
      for (size_t d = next_doc++; d < docs.size(); d = next_doc++) {
        count += static_cast<int64_t>(tok.encode(docs[d]).size());
      }
      total += count;
    };
    if (threads == 1) {
      worker();
    } else {
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
      for (std::thread& th : pool) th.join();
    }
    m.num_tokens = total.load();
  };
  m.timing = bench::time_it(run, warmup, repeats);
  return m;
}

struct LoaderRun {
  int64_t num_batches = 0;
  double tokens_per_s = 0.0;  // the producer's: tokens / its seconds inside Loader::next()
  double wall_s = 0.0;        // the consumer's, all batches
  double waited_s = 0.0;      // the consumer's, blocked on an empty queue
};

// One pass of a PrefetchLoader (B=8, T=2048) over `docs`, written as JSONL to a temporary file.
LoaderRun run_loader(const data::Tokenizer& tok, const std::vector<std::string_view>& docs) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / str("titan_tokenizer_bench_", ::getpid(), ".jsonl");
  {
    std::ofstream out(path, std::ios::binary);
    for (std::string_view doc : docs) out << nlohmann::json{{"text", doc}}.dump() << '\n';
    TITAN_CHECK(out.good(), "tokenizer_bench: cannot write ", path.string());
  }
  data::LoaderConfig c;
  c.dataset.path = path.string();
  c.batch_size = 8;
  c.seq_len = 2048;
  c.eot_id = tok.token_id("<|endoftext|>").value();
  c.infinite = false;
  LoaderRun r;
  {
    const double t0 = bench::now_seconds();
    data::PrefetchLoader loader(c, tok);
    while (loader.next()) ++r.num_batches;
    r.wall_s = bench::now_seconds() - t0;
    r.tokens_per_s = loader.tokens_per_second();
    r.waited_s = loader.seconds_waiting();
  }
  std::filesystem::remove(path);
  return r;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options opt = parse(argc, argv);
  std::string text;
  for (const std::string& path : opt.texts) text += read_file(path);
  const std::vector<std::string_view> docs = split_documents(text, opt.chunk);
  const double mb = static_cast<double>(text.size()) / 1e6;

  double t0 = bench::now_seconds();
  const data::Tokenizer tok = data::Tokenizer::from_file(opt.tokenizer);
  const double load_s = bench::now_seconds() - t0;
  std::printf("tokenizer %s (loaded in %.2f s)\ntext: %zu files, %zu bytes, %zu documents of ~%zu bytes\n",
              opt.tokenizer.c_str(), load_s, opt.texts.size(), text.size(), docs.size(), opt.chunk);

  // The Split regex alone (PCRE2 JIT, as the pre-tokenizer runs it), no NFC, no BPE.
  const data::Regex regex(split_pattern(opt.tokenizer), false, opt.tokenizer);
  int64_t num_pieces = 0;
  const bench::Timing regex_timing = bench::time_it(
      [&] {
        std::vector<std::pair<size_t, size_t>> matches;
        num_pieces = 0;
        for (std::string_view doc : docs) {
          matches.clear();
          regex.find_all(doc, matches);
          num_pieces += static_cast<int64_t>(matches.size());
        }
      },
      1, opt.repeats);
  std::printf("pre-tokenizer Split regex alone (PCRE2 JIT, 1 thread): %ld matches | median %.4f s | %.2f MB/s\n",
              static_cast<long>(num_pieces), regex_timing.median_s, mb / regex_timing.median_s);

  struct Mode {
    int threads;
    Measured ours;
    double cold_s = 0.0;  // first pass of a freshly loaded tokenizer (empty word cache), median of 3
    nlohmann::json peer;
  };
  std::vector<Mode> modes = {{1, {}, 0.0, {}}};
  if (opt.threads > 1) modes.push_back({opt.threads, {}, 0.0, {}});
  for (Mode& mode : modes) {
    std::vector<double> cold;
    for (int i = 0; i < 3; ++i) {
      const data::Tokenizer fresh = data::Tokenizer::from_file(opt.tokenizer);
      cold.push_back(encode_all(fresh, docs, mode.threads, 1, 0).timing.median_s);
    }
    mode.cold_s = bench::median(cold);
    mode.ours = encode_all(tok, docs, mode.threads, opt.repeats);
    const bench::Timing& t = mode.ours.timing;
    std::printf("ours, %d thread(s): %ld tokens | median %.4f s (min %.4f, max %.4f) | %.2f MB/s | %.0f tokens/s"
                " | cold first pass %.2f MB/s\n",
                mode.threads, static_cast<long>(mode.ours.num_tokens), t.median_s, t.min_s, t.max_s,
                mb / t.median_s, static_cast<double>(mode.ours.num_tokens) / t.median_s, mb / mode.cold_s);
  }
  const LoaderRun loader = run_loader(tok, docs);
  std::printf("loader (PrefetchLoader, B=8, T=2048, 1 producer thread): %ld batches | %.0f tokens/s"
              " (producer) | consumer %.4f s, of which waiting %.4f s\n",
              static_cast<long>(loader.num_batches), loader.tokens_per_s, loader.wall_s, loader.waited_s);
  if (!opt.peer) return 0;

  std::string files;
  for (const std::string& path : opt.texts) files += " --text " + bench::shell_quote(path);
  bool tokens_match = true;
  for (Mode& mode : modes) {
    const std::string cmd = str("python3 ", bench::shell_quote(TITAN_SOURCE_DIR "/tools/bench_hf_tokenizer.py"),
                                " --tokenizer ", bench::shell_quote(opt.tokenizer), files, " --threads ", mode.threads,
                                " --chunk ", opt.chunk, " --repeats ", opt.repeats);
    std::printf("\npeer: %s\n", cmd.c_str());
    std::fflush(stdout);
    const bench::PeerRun peer = bench::run_peer(cmd);
    std::fputs(peer.output.c_str(), stdout);
    if (!peer.ok()) {
      std::printf("peer failed (exit %d); pip install tokenizers (tools/requirements.txt) to compare\n",
                  peer.exit_code);
      return 1;
    }
    mode.peer = peer.result;
    const auto peer_tokens = peer.result["num_tokens"].get<int64_t>();
    const auto peer_docs = peer.result["num_docs"].get<size_t>();
    if (peer_tokens != mode.ours.num_tokens || peer_docs != docs.size()) {
      std::printf("MISMATCH: ours %ld tokens in %zu docs, HF %ld tokens in %zu docs\n",
                  static_cast<long>(mode.ours.num_tokens), docs.size(), static_cast<long>(peer_tokens), peer_docs);
      tokens_match = false;
    }
  }

  std::printf("\n| threads | impl | MB/s | tokens/s | ours / HF | cold first pass MB/s | ours / HF |\n"
              "|---|---|---|---|---|---|---|\n");
  nlohmann::json result = {{"impl", "titan.cpp"}, {"num_bytes", text.size()}, {"num_docs", docs.size()},
                           {"regex_mb_per_s", mb / regex_timing.median_s}, {"tokens_match", tokens_match},
                           {"loader_tokens_per_s", loader.tokens_per_s}};
  for (const Mode& mode : modes) {
    const double ours_mbs = mb / mode.ours.timing.median_s;
    const double peer_mbs = mode.peer["mb_per_s"].get<double>();
    const double r = bench::ratio(ours_mbs, peer_mbs);
    const double cold_mbs = mb / mode.cold_s;
    const double peer_cold_mbs = mode.peer["cold_mb_per_s"].get<double>();
    const double cold_r = bench::ratio(cold_mbs, peer_cold_mbs);
    std::printf("| %d | titan.cpp | %.2f | %.0f | %.2fx | %.2f | %.2fx |\n", mode.threads, ours_mbs,
                static_cast<double>(mode.ours.num_tokens) / mode.ours.timing.median_s, r, cold_mbs, cold_r);
    std::printf("| %d | HF tokenizers %s (%s) | %.2f | %.0f | | %.2f | |\n", mode.threads,
                mode.peer["tokenizers_version"].get<std::string>().c_str(),
                mode.peer["mode"].get<std::string>().c_str(), peer_mbs, mode.peer["tokens_per_s"].get<double>(),
                peer_cold_mbs);
    result[str("cold_mb_per_s_", mode.threads, "t")] = cold_mbs;
    result[str("hf_cold_mb_per_s_", mode.threads, "t")] = peer_cold_mbs;
    result[str("mb_per_s_", mode.threads, "t")] = ours_mbs;
    result[str("hf_mb_per_s_", mode.threads, "t")] = peer_mbs;
    result[str("ratio_", mode.threads, "t")] = r;
  }
  std::printf("token totals %s\n", tokens_match ? "match HF" : "DIFFER from HF");
  bench::print_result(result);
  return tokens_match ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "tokenizer_bench: error: %s\n", e.what());
  return 1;
}
