// Dataset read throughput: titan's DocumentSource over Parquet (data/parquet.h) against pyarrow
// reading the same file into Python rows (tools/bench_parquet_peer.py: ParquetFile.iter_batches +
// to_pylist, what a PyTorch pipeline over a Hub dataset does), in the same run, and titan's JSONL
// path over the same rows for reference. Nothing is tokenized: this is the reader alone.
//
//   python3 tools/bench_parquet_peer.py --make DIR [--mb 100]      (once: text/chat .parquet, text.jsonl)
//   build/bench/data_bench DIR [--repeats 3] [--no-peer]
// MB/s counts 1e6 bytes of document text per second (chat: the messages' content); median of
// --repeats passes, each from a freshly opened source (the file in the page cache after the first).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness.h"
#include "titan/core/cpu_features.h"
#include "titan/core/error.h"
#include "titan/data/dataset.h"

using namespace titan;

namespace {

struct Pass {
  double seconds = 0.0;
  int64_t rows = 0, bytes = 0;
};

Pass read_all(const std::string& path, const std::string& format) {
  data::DatasetConfig c;
  c.path = path;
  c.format = format;
  const auto t0 = std::chrono::steady_clock::now();
  data::DocumentSource source(c);
  Pass p;
  while (const std::optional<data::Document> d = source.next()) {
    ++p.rows;
    if (format == "chat") {
      for (const auto& m : d->messages) {
        p.bytes += static_cast<int64_t>(m["content"].get_ref<const std::string&>().size());
      }
    } else {
      p.bytes += static_cast<int64_t>(d->text.size());
    }
  }
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  TITAN_CHECK(argc >= 2, "usage: data_bench DIR [--repeats 3] [--no-peer] (DIR: tools/bench_parquet_peer.py --make)");
  const std::string dir = argv[1];
  int repeats = 3;
  bool peer = true;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--repeats" && i + 1 < argc) repeats = std::stoi(argv[++i]);
    if (a == "--no-peer") peer = false;
  }
  std::printf("CPU: %s (cpu path %s)\n", cpu_model_name().c_str(), cpu_path_name().c_str());
  struct Row {
    std::string name, file, format, column;
  };
  const std::vector<Row> rows = {{"text.parquet", dir + "/text.parquet", "text", "text"},
                                 {"chat.parquet", dir + "/chat.parquet", "chat", "messages"},
                                 {"text.jsonl", dir + "/text.jsonl", "text", ""}};
  std::printf("%-14s %12s %10s %12s %12s %8s\n", "file", "rows", "MB text", "titan MB/s", "pyarrow MB/s", "ratio");
  for (const Row& r : rows) {
    std::vector<double> times;
    Pass p;
    for (int k = 0; k < repeats; ++k) {
      p = read_all(r.file, r.format);
      times.push_back(p.seconds);
    }
    std::sort(times.begin(), times.end());
    const double ours = static_cast<double>(p.bytes) / 1e6 / times[times.size() / 2];
    double theirs = 0.0;
    if (peer && !r.column.empty()) {
      const std::string script = TITAN_SOURCE_DIR "/tools/bench_parquet_peer.py";
      const bench::PeerRun run = bench::run_peer(str("python3 ", bench::shell_quote(script), " --read ",
                                                     bench::shell_quote(r.file), " --column ", r.column, " --repeats ",
                                                     repeats));
      if (run.ok()) {
        TITAN_CHECK(run.result["rows"].get<int64_t>() == p.rows && run.result["bytes"].get<int64_t>() >= p.bytes / 2,
                    "data_bench: the peer read ", run.result.dump(), ", titan ", p.rows, " rows");
        theirs = static_cast<double>(p.bytes) / 1e6 / run.result["seconds"].get<double>();
      }
    }
    std::printf("%-14s %12ld %10.1f %12.1f %12s %8s\n", r.name.c_str(), static_cast<long>(p.rows),
                static_cast<double>(p.bytes) / 1e6, ours, theirs > 0 ? str(theirs).c_str() : "-",
                theirs > 0 ? str(bench::ratio(ours, theirs), "x").c_str() : "-");
  }
  return 0;
}
