// Metrics writers: CRC32C against published vectors, the TensorBoard event file read back by an
// independent TFRecord + protobuf reader written here from the spec (not from tensorboard.cpp),
// JSONL round trips, and the loss plot SVG.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "titan/core/error.h"
#include "titan/core/crc32c.h"
#include "titan/train/jsonl_writer.h"
#include "titan/train/loss_plot.h"
#include "titan/train/metrics.h"
#include "titan/train/tensorboard.h"

namespace fs = std::filesystem;
using titan::crc32c;

namespace {

// A fresh folder per test, removed afterwards.
class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(fs::temp_directory_path() / ("titan_metrics_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// --- independent reader ---

// Bit-at-a-time CRC-32C (reflected 0x82F63B78): a second implementation, not the table one.
uint32_t ref_crc32c(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (const unsigned char b : bytes) {
    crc ^= b;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}
uint32_t ref_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

uint64_t load_le(const std::string& s, size_t pos, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(s[pos + i])) << (8 * i);
  return v;
}

// TFRecord: throws std::runtime_error on a bad CRC or a truncated record.
std::vector<std::string> read_records(const std::string& file) {
  std::vector<std::string> records;
  size_t pos = 0;
  while (pos < file.size()) {
    if (pos + 12 > file.size()) throw std::runtime_error("truncated header");
    const uint64_t len = load_le(file, pos, 8);
    if (load_le(file, pos + 8, 4) != ref_mask(ref_crc32c(file.substr(pos, 8))))
      throw std::runtime_error("bad length crc");
    if (pos + 12 + len + 4 > file.size()) throw std::runtime_error("truncated data");
    std::string data = file.substr(pos + 12, len);
    if (load_le(file, pos + 12 + len, 4) != ref_mask(ref_crc32c(data)))
      throw std::runtime_error("bad data crc");
    records.push_back(std::move(data));
    pos += 12 + len + 4;
  }
  return records;
}

struct Field {
  uint32_t number = 0;
  uint32_t wire_type = 0;
  uint64_t varint = 0;  // wire type 0, 1 (raw 64 bits), 5 (raw 32 bits)
  std::string bytes;    // wire type 2
};

uint64_t read_varint(const std::string& s, size_t& pos) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos >= s.size()) throw std::runtime_error("truncated varint");
    const auto b = static_cast<unsigned char>(s[pos++]);
    v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if (!(b & 0x80)) return v;
  }
  throw std::runtime_error("varint too long");
}

std::vector<Field> decode(const std::string& msg) {
  std::vector<Field> fields;
  size_t pos = 0;
  while (pos < msg.size()) {
    const uint64_t key = read_varint(msg, pos);
    Field f;
    f.number = static_cast<uint32_t>(key >> 3);
    f.wire_type = static_cast<uint32_t>(key & 7);
    switch (f.wire_type) {
      case 0: f.varint = read_varint(msg, pos); break;
      case 1: f.varint = load_le(msg, pos, 8); pos += 8; break;
      case 5: f.varint = load_le(msg, pos, 4); pos += 4; break;
      case 2: {
        const uint64_t n = read_varint(msg, pos);
        f.bytes = msg.substr(pos, n);
        pos += n;
        break;
      }
      default: throw std::runtime_error("unexpected wire type");
    }
    if (pos > msg.size()) throw std::runtime_error("field runs past the message");
    fields.push_back(std::move(f));
  }
  return fields;
}

struct Scalar {
  std::string tag;
  float value;
  int64_t step;
  double wall_time;
};

// Event {1: wall_time double, 2: step int64, 3: file_version, 5: Summary {1: Value {1: tag, 2: float}}}
std::vector<Scalar> scalars_of(const std::vector<std::string>& records) {
  std::vector<Scalar> out;
  for (size_t r = 1; r < records.size(); ++r) {
    double wall = 0;
    int64_t step = 0;
    std::vector<std::pair<std::string, float>> values;
    for (const Field& f : decode(records[r])) {
      if (f.number == 1) {
        EXPECT_EQ(f.wire_type, 1u);
        std::memcpy(&wall, &f.varint, 8);
      } else if (f.number == 2) {
        EXPECT_EQ(f.wire_type, 0u);
        step = static_cast<int64_t>(f.varint);
      } else if (f.number == 5) {
        EXPECT_EQ(f.wire_type, 2u);
        for (const Field& v : decode(f.bytes)) {
          EXPECT_EQ(v.number, 1u);
          std::string tag;
          std::optional<float> value;
          for (const Field& vf : decode(v.bytes)) {
            if (vf.number == 1) tag = vf.bytes;
            if (vf.number == 2) {
              EXPECT_EQ(vf.wire_type, 5u);
              const auto bits = static_cast<uint32_t>(vf.varint);
              float x;
              std::memcpy(&x, &bits, 4);
              value = x;
            }
          }
          EXPECT_TRUE(value.has_value()) << "Value without simple_value, tag " << tag;
          values.emplace_back(tag, value.value_or(0.f));
        }
      } else {
        ADD_FAILURE() << "unexpected Event field " << f.number;
      }
    }
    for (auto& [tag, value] : values) out.push_back({tag, value, step, wall});
  }
  return out;
}

fs::path only_event_file(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  EXPECT_EQ(files.size(), 1u);
  return files.empty() ? fs::path() : files[0];
}

}  // namespace

// --- CRC32C ---

TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0x00000000u);
  // RFC 3720 appendix B.4.
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
  std::string inc(32, '\0'), dec(32, '\0');
  for (int i = 0; i < 32; ++i) {
    inc[i] = static_cast<char>(i);
    dec[i] = static_cast<char>(31 - i);
  }
  EXPECT_EQ(crc32c(inc), 0x46DD794Eu);
  EXPECT_EQ(crc32c(dec), 0x113FDB5Cu);
  // The test's own bit-wise CRC agrees on the same vectors, so the reader below can be trusted.
  EXPECT_EQ(ref_crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(ref_crc32c(inc), 0x46DD794Eu);
}

TEST(Crc32c, ContinuesAcrossChunks) {
  const std::string s = "The quick brown fox jumps over the lazy dog";
  const uint32_t whole = crc32c(s);
  EXPECT_EQ(crc32c(s.data() + 10, s.size() - 10, crc32c(s.data(), 10)), whole);
  EXPECT_EQ(whole, ref_crc32c(s));
}

// --- TensorBoard ---

TEST(TensorBoardWriter, EventFileReadsBack) {
  TempDir dir("tb");
  const fs::path folder = dir.path() / "nested" / "tb";  // mkdir -p
  std::string path;
  {
    titan::train::TensorBoardWriter writer(folder.string());
    path = writer.path();
    writer.add_scalar("train/loss", 7.625, 0);
    writer.add_scalar("train/loss", 0.1, 1);
    writer.add_scalars({{"train/lr", 3e-4}, {"train/grad_norm", 1.5}}, int64_t{1} << 40);
    writer.add_scalar("train/loss", std::numeric_limits<double>::quiet_NaN(), 2);
    writer.flush();
  }
  const fs::path file = only_event_file(folder);
  EXPECT_EQ(file.string(), path);
  const std::string name = file.filename().string();
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  const std::string suffix = "." + std::to_string(::getpid()) + ".0";
  ASSERT_GE(name.size(), suffix.size());
  EXPECT_EQ(name.substr(name.size() - suffix.size()), suffix) << name;

  const std::vector<std::string> records = read_records(read_file(file));
  ASSERT_EQ(records.size(), 5u);
  // First event: wall_time + file_version only.
  const std::vector<Field> first = decode(records[0]);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].number, 1u);
  EXPECT_EQ(first[0].wire_type, 1u);
  double wall0;
  std::memcpy(&wall0, &first[0].varint, 8);
  EXPECT_GT(wall0, 1.6e9);  // after 2020, seconds not ms
  EXPECT_LT(wall0, 1e10);
  EXPECT_EQ(first[1].number, 3u);
  EXPECT_EQ(first[1].bytes, "brain.Event:2");

  const std::vector<Scalar> s = scalars_of(records);
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(s[0].tag, "train/loss");
  EXPECT_EQ(s[0].step, 0);
  EXPECT_EQ(s[0].value, 7.625f);
  EXPECT_EQ(s[1].step, 1);
  EXPECT_EQ(s[1].value, 0.1f);
  EXPECT_EQ(s[2].tag, "train/lr");
  EXPECT_EQ(s[2].value, 3e-4f);
  EXPECT_EQ(s[3].tag, "train/grad_norm");
  EXPECT_EQ(s[3].value, 1.5f);
  EXPECT_EQ(s[2].step, int64_t{1} << 40);
  EXPECT_EQ(s[3].step, int64_t{1} << 40);
  EXPECT_TRUE(std::isnan(s[4].value));
  for (const Scalar& x : s) EXPECT_GE(x.wall_time, wall0);
}

TEST(TensorBoardWriter, RecordsAreOnDiskBeforeClose) {
  // A crash (no destructor) must leave a readable file: read it while the writer is open.
  TempDir dir("tb_open");
  titan::train::TensorBoardWriter writer(dir.path().string());
  writer.add_scalar("loss", 2.0, 5);
  const std::vector<std::string> records = read_records(read_file(writer.path()));
  ASSERT_EQ(records.size(), 2u);
  const std::vector<Scalar> s = scalars_of(records);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].step, 5);
  EXPECT_EQ(s[0].value, 2.0f);
}

TEST(TensorBoardWriter, ReaderCatchesCorruption) {
  // The CRC checks above are real: flipping one byte of a record's data is detected.
  TempDir dir("tb_corrupt");
  std::string path;
  {
    titan::train::TensorBoardWriter writer(dir.path().string());
    writer.add_scalar("loss", 1.0, 1);
    path = writer.path();
  }
  std::string bytes = read_file(path);
  bytes[bytes.size() - 6] ^= 0x01;  // inside the last record's data
  EXPECT_THROW(read_records(bytes), std::runtime_error);
  EXPECT_THROW(read_records(bytes.substr(0, bytes.size() - 2)), std::runtime_error);
}

TEST(TensorBoardWriter, TwoWritersGetTwoFiles) {
  TempDir dir("tb_two");
  titan::train::TensorBoardWriter a(dir.path().string());
  titan::train::TensorBoardWriter b(dir.path().string());
  EXPECT_NE(a.path(), b.path());
}

TEST(TensorBoardWriter, UnwritableFolderThrows) {
  TempDir dir("tb_bad");
  const fs::path blocker = dir.path() / "file";
  std::ofstream(blocker) << "x";
  EXPECT_THROW(titan::train::TensorBoardWriter((blocker / "tb").string()), titan::Error);
}

// --- JSONL ---

TEST(JsonlWriter, LinesParseAndRoundTrip) {
  TempDir dir("jsonl");
  const fs::path path = dir.path() / "metrics.jsonl";
  const double third = 1.0 / 3.0;
  {
    titan::train::JsonlWriter w(path.string());
    w.write({{"step", 1}, {"loss", 7.6}, {"lr", third}, {"tiny", 1e-300}});
    w.write({{"step", 2}, {"loss", std::numeric_limits<double>::quiet_NaN()},
             {"gn", std::numeric_limits<double>::infinity()}, {"phase", "warmup"}});
    w.flush();
    // Lines are on disk before close.
    const std::string so_far = read_file(path);
    EXPECT_EQ(std::count(so_far.begin(), so_far.end(), '\n'), 2);
  }
  // Keys keep the caller's order, numbers their shortest round-trip spelling.
  EXPECT_EQ(read_file(path).rfind("{\"step\":1,\"loss\":7.6,", 0), 0u) << read_file(path);
  std::ifstream in(path);
  std::vector<nlohmann::json> rows;
  for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["step"].get<int64_t>(), 1);
  EXPECT_TRUE(rows[0]["step"].is_number_integer());
  EXPECT_EQ(rows[0]["loss"].get<double>(), 7.6);  // exact, not approximate
  EXPECT_EQ(rows[0]["lr"].get<double>(), third);
  EXPECT_EQ(rows[0]["tiny"].get<double>(), 1e-300);
  EXPECT_TRUE(rows[1]["loss"].is_null());
  EXPECT_TRUE(rows[1]["gn"].is_null());
  EXPECT_EQ(rows[1]["phase"], "warmup");
}

TEST(JsonlWriter, AppendContinuesAndDefaultTruncates) {
  TempDir dir("jsonl_append");
  const fs::path path = dir.path() / "m.jsonl";
  auto count_lines = [&] {
    std::ifstream in(path);
    int n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  };
  { titan::train::JsonlWriter(path.string()).write({{"step", 1}}); }
  { titan::train::JsonlWriter(path.string(), /*append=*/true).write({{"step", 2}}); }
  EXPECT_EQ(count_lines(), 2);
  { titan::train::JsonlWriter(path.string()).write({{"step", 3}}); }
  EXPECT_EQ(count_lines(), 1);
}

TEST(JsonlWriter, RejectsNonObjectsAndBadPaths) {
  TempDir dir("jsonl_bad");
  titan::train::JsonlWriter w((dir.path() / "m.jsonl").string());
  EXPECT_THROW(w.write(nlohmann::json::array({1, 2})), titan::Error);
  w.write(nlohmann::json{{"plain", true}});  // a plain nlohmann::json is accepted too
  EXPECT_THROW(titan::train::JsonlWriter((dir.path() / "missing" / "m.jsonl").string()), titan::Error);
}

// --- loss plot ---

namespace {

// The numbers in points="x,y x,y ..." of the <polyline class="cls">; nullopt when absent.
std::optional<std::vector<std::pair<double, double>>> polyline_points(const std::string& svg,
                                                                      const std::string& cls) {
  const size_t at = svg.find("<polyline class=\"" + cls + "\"");
  if (at == std::string::npos) return std::nullopt;
  const size_t begin = svg.find("points=\"", at) + 8;
  const size_t end = svg.find('"', begin);
  std::istringstream ss(svg.substr(begin, end - begin));
  std::vector<std::pair<double, double>> pts;
  for (std::string pair; ss >> pair;) {
    const size_t comma = pair.find(',');
    pts.emplace_back(std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1)));
  }
  return pts;
}

}  // namespace

TEST(LossPlot, SvgHasCurvesAxesAndSkipsNonFinite) {
  TempDir dir("plot");
  std::vector<int64_t> steps;
  std::vector<double> losses;
  for (int i = 1; i <= 50; ++i) {
    steps.push_back(i * 10);
    losses.push_back(8.0 * std::exp(-i / 15.0) + 2.0 + 0.2 * std::sin(i));
  }
  losses[7] = std::numeric_limits<double>::quiet_NaN();
  losses[20] = std::numeric_limits<double>::infinity();
  const fs::path path = dir.path() / "loss.svg";
  titan::train::write_loss_plot_svg(path.string(), steps, losses, "debug <run> & co");
  const std::string svg = read_file(path);

  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '<'), std::count(svg.begin(), svg.end(), '>'));
  EXPECT_NE(svg.find(">step</text>"), std::string::npos);
  EXPECT_NE(svg.find(">loss</text>"), std::string::npos);
  EXPECT_NE(svg.find("debug &lt;run&gt; &amp; co"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);

  const auto raw = polyline_points(svg, "raw");
  const auto smooth = polyline_points(svg, "smooth");
  ASSERT_TRUE(raw && smooth);
  EXPECT_EQ(raw->size(), 48u);
  EXPECT_EQ(smooth->size(), 48u);
  for (size_t i = 0; i < raw->size(); ++i) {
    const auto [x, y] = (*raw)[i];
    EXPECT_GE(x, 0.0);
    EXPECT_LE(x, 800.0);
    EXPECT_GE(y, 0.0);
    EXPECT_LE(y, 450.0);
    if (i) {
      EXPECT_GT(x, (*raw)[i - 1].first);  // steps increase left to right
    }
  }
  // Loss falls, so the curve's first point is higher on the page (smaller y) than its last.
  EXPECT_LT(raw->front().second, raw->back().second);

  // Atomic write: nothing but the plot is left in the folder; rewriting replaces it.
  titan::train::write_loss_plot_svg(path.string(), {1, 2}, {3.0, 2.0}, "again", {.ema = 0.0});
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    ++entries;
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
  EXPECT_EQ(entries, 1);
  const std::string again = read_file(path);
  EXPECT_EQ(polyline_points(again, "raw")->size(), 2u);
  EXPECT_FALSE(polyline_points(again, "smooth"));  // ema = 0: no smoothed curve
}

TEST(LossPlot, DegenerateInputs) {
  using titan::train::loss_plot_svg;
  // No finite values: still a valid chart, no curve.
  const std::string none = loss_plot_svg({1, 2}, {NAN, INFINITY}, "t");
  EXPECT_EQ(none.rfind("<svg", 0), 0u);
  EXPECT_FALSE(polyline_points(none, "raw"));
  // One point and constant losses: finite coordinates.
  for (const auto& svg : {loss_plot_svg({5}, {2.5}, "t"), loss_plot_svg({1, 2, 3}, {1.0, 1.0, 1.0}, "t")}) {
    const auto raw = polyline_points(svg, "raw");
    ASSERT_TRUE(raw);
    for (const auto& [x, y] : *raw) EXPECT_TRUE(std::isfinite(x) && std::isfinite(y));
  }
  EXPECT_THROW(loss_plot_svg({1, 2}, {1.0}, "t"), titan::Error);
}

TEST(LossPlot, SecondSeriesSharesTheAxesAndIsLabelled) {
  using titan::train::loss_plot_svg;
  // Validation points at steps and losses the training curve also has land on the same pixels;
  // one outside the training range widens the axes (it stays inside the plot).
  const std::vector<int64_t> steps = {1, 2, 3, 4};
  const std::vector<double> losses = {4.0, 3.0, 2.5, 2.0};
  const std::string svg =
      loss_plot_svg(steps, losses, "t", {.ema = 0.0}, {"validation", {2, 4}, {3.0, 2.0}});
  const auto raw = polyline_points(svg, "raw");
  const auto val = polyline_points(svg, "validation");
  ASSERT_TRUE(raw && val);
  ASSERT_EQ(val->size(), 2u);
  EXPECT_EQ((*val)[0], (*raw)[1]);
  EXPECT_EQ((*val)[1], (*raw)[3]);
  EXPECT_NE(svg.find(">validation</text>"), std::string::npos);
  EXPECT_NE(svg.find(">train</text>"), std::string::npos);
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '<'), std::count(svg.begin(), svg.end(), '>'));
  const std::string wide = loss_plot_svg(steps, losses, "t", {.ema = 0.0}, {"validation", {8}, {9.0}});
  const auto p = polyline_points(wide, "validation");
  ASSERT_TRUE(p);
  const auto [x, y] = p->front();
  EXPECT_GT(x, polyline_points(wide, "raw")->back().first);
  EXPECT_GE(y, 0.0);
  EXPECT_LT(y, polyline_points(wide, "raw")->front().second);  // higher than every training point
  // No second series: no validation polyline, no legend.
  EXPECT_FALSE(polyline_points(loss_plot_svg(steps, losses, "t", {.ema = 0.0}), "validation"));
  EXPECT_THROW(loss_plot_svg(steps, losses, "t", {}, {"v", {1, 2}, {1.0}}), titan::Error);
}

// A validation pass reaches the console line, metrics.jsonl (its own row kind), TensorBoard
// (validation/loss and validation/perplexity at its step) and loss.svg.
TEST(MetricsLogger, ValidationGoesToEveryWriter) {
  TempDir dir("validation");
  titan::train::MetricsOptions o;
  o.dump_folder = dir.path().string();
  o.log_freq = 1;
  o.total_steps = 2;
  o.enable_tensorboard = true;
  o.tb_folder = "tb";
  o.console = false;
  {
    titan::train::MetricsLogger logger(o);
    titan::train::StepMetrics m;
    m.step = 1;
    m.loss = 5.0;
    logger.record(m);
    m.step = 2;
    m.loss = 4.0;
    logger.record(m);
    logger.record_validation({2, 4.5, std::exp(4.5), 1024, 4, 0.25});
    logger.finish();
  }
  std::ifstream in(dir.path() / "metrics.jsonl");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].find("kind"), std::string::npos);  // training rows keep their layout
  EXPECT_EQ(lines[2].rfind("{\"kind\":\"validation\",\"step\":2,\"loss\":4.5,", 0), 0u) << lines[2];
  EXPECT_NE(lines[2].find("\"targets\":1024,\"batches\":4,\"seconds\":0.25"), std::string::npos) << lines[2];

  const std::vector<Scalar> s = scalars_of(read_records(read_file(only_event_file(dir.path() / "tb"))));
  std::vector<Scalar> val;
  for (const Scalar& x : s) {
    if (x.tag.rfind("validation/", 0) == 0) val.push_back(x);
  }
  ASSERT_EQ(val.size(), 2u);
  EXPECT_EQ(val[0].tag, "validation/loss");
  EXPECT_EQ(val[0].value, 4.5f);
  EXPECT_EQ(val[0].step, 2);
  EXPECT_EQ(val[1].tag, "validation/perplexity");
  EXPECT_EQ(val[1].value, static_cast<float>(std::exp(4.5)));

  EXPECT_TRUE(polyline_points(read_file(dir.path() / "loss.svg"), "validation"));
  EXPECT_EQ(titan::train::MetricsLogger::format_validation_line({2, 4.5, std::exp(4.5), 1024, 4, 0.25}),
            "validate: step     2  loss:   4.5000  perplexity: 90.02  tokens: 1,024 (4 batches)  time: 0.25s");
}

// What a model reports of a step (nn::StepMetric) is written as given: its fields after the
// trainer's (comm included) in its order, its scalars on TensorBoard, its text on the console line
// before the comm part.
TEST(MetricsLogger, ModelMetricsAreWrittenAsGiven) {
  TempDir dir("model_metrics");
  titan::train::MetricsOptions o;
  o.dump_folder = dir.path().string();
  o.log_freq = 1;
  o.total_steps = 1;
  o.enable_tensorboard = true;
  o.tb_folder = "tb";
  o.console = false;
  titan::train::StepMetrics m;
  m.step = 1;
  m.loss = 5.0;
  m.comm_bytes = 2e6;
  m.model_metrics = {{"load_min", int64_t{3}, "model/load_min", "  load: 3"},
                     {"extra_loss", 0.5, "model/extra_loss", ""},
                     {"rank_load", std::vector<int64_t>{4, 5}, "", "  ranks: 4/5"}};
  {
    titan::train::MetricsLogger logger(o);
    logger.record(m);
    logger.finish();
  }
  std::ifstream in(dir.path() / "metrics.jsonl");
  std::string line;
  std::getline(in, line);
  EXPECT_NE(line.find("\"comm_seconds\":0.0,\"load_min\":3,\"extra_loss\":0.5,\"rank_load\":[4,5]}"),
            std::string::npos) << line;
  const std::string text = titan::train::MetricsLogger::format_line(m);
  EXPECT_NE(text.find("  load: 3  ranks: 4/5  comm: 2.0MB"), std::string::npos) << text;
  const std::vector<Scalar> s = scalars_of(read_records(read_file(only_event_file(dir.path() / "tb"))));
  std::vector<std::string> tags;
  for (const Scalar& x : s) {
    if (x.tag.rfind("model/", 0) == 0) tags.push_back(x.tag);
  }
  EXPECT_EQ(tags, (std::vector<std::string>{"model/load_min", "model/extra_loss"}));
}

// A metrics.jsonl or a TensorBoard folder (or a folder on its way) that is a symbolic link in the
// dump folder is refused naming it: following it would truncate, append to or fill a place
// outside the folder titan was given.
TEST(MetricsLogger, LinksInTheDumpFolderAreRefusedNotFollowed) {
  TempDir dir("links");
  const fs::path outside = dir.path() / "outside";
  fs::create_directories(outside);
  std::ofstream(outside / "victim.txt") << "keep";
  const auto error_of = [](const titan::train::MetricsOptions& o) {
    try {
      titan::train::MetricsLogger logger(o);
    } catch (const titan::Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  for (const bool append : {false, true}) {
    const fs::path dump = dir.path() / (append ? "jsonl_append" : "jsonl");
    fs::create_directories(dump);
    fs::create_symlink(outside / "victim.txt", dump / "metrics.jsonl");
    titan::train::MetricsOptions o;
    o.dump_folder = dump.string();
    o.append = append;
    const std::string message = error_of(o);
    EXPECT_NE(message.find((dump / "metrics.jsonl").string() + " is a symbolic link"), std::string::npos) << message;
    EXPECT_EQ(read_file(outside / "victim.txt"), "keep");
  }
  for (const std::string tb_folder : {"tb", "runs/tb"}) {
    const fs::path dump = dir.path() / ("tb_" + std::to_string(tb_folder.size()));
    fs::create_directories(dump);
    const fs::path link = dump / fs::path(tb_folder).begin()->string();  // "tb", or "runs" on the way
    fs::create_symlink(outside, link);
    titan::train::MetricsOptions o;
    o.dump_folder = dump.string();
    o.enable_jsonl = false;
    o.enable_tensorboard = true;
    o.tb_folder = tb_folder;
    const std::string message = error_of(o);
    EXPECT_NE(message.find(link.string() + " is a symbolic link"), std::string::npos) << message;
    size_t entries = 0;
    for (const auto& e : fs::recursive_directory_iterator(outside)) entries += e.path().filename() != "victim.txt";
    EXPECT_EQ(entries, 0u) << "nothing written through " << link;
  }
}
