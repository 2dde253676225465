// The GGUF reader and writer (checkpoint/gguf.h) and ggml's block codecs (core/ggml_blocks.h):
// a written file reads back key for key and byte for byte; damaged files are one-line errors naming
// the file and what was being read; the decoders equal the gguf package's dequantizer bit for bit
// (tests/fixtures/gguf/quant_types, tools/make_gguf_fixtures.py) and the format's definition.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "ops/op_harness.h"
#include "titan/checkpoint/gguf.h"
#include "titan/checkpoint/json_file.h"
#include "titan/checkpoint/safetensors.h"
#include "titan/core/dtype.h"
#include "titan/core/error.h"
#include "titan/core/ggml_blocks.h"

namespace titan {
namespace {

namespace fs = std::filesystem;
using ckpt::GgufFile;
using ckpt::GgufKind;
using ckpt::GgufValue;

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("titan_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string bytes_of(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

fs::path write_sample(const fs::path& path) {
  ckpt::GgufWriter w;
  w.add("general.architecture", GgufValue::of_string("qwen3"));
  w.add("qwen3.block_count", GgufValue::of_u32(2));
  w.add("qwen3.rope.freq_base", GgufValue::of_f32(1e6f));
  w.add("tokenizer.ggml.add_bos_token", GgufValue::of_bool(false));
  w.add("big", GgufValue::of_u64(uint64_t{1} << 40));
  w.add("neg", GgufValue::integer(GgufKind::i64, -5));
  w.add("tokens", GgufValue::array_of(GgufKind::string, {GgufValue::of_string("a"), GgufValue::of_string("<|x|>")}));
  w.add("types", GgufValue::array_of(GgufKind::i32, {GgufValue::of_i32(1), GgufValue::of_i32(3)}));
  std::vector<float> a(3 * 64);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(static_cast<float>(i));
  w.add_tensor("a", GgmlType::f32, {64, 3}, [&](std::string& b) { b = bytes_of(a); });
  w.add_tensor("q", GgmlType::q8_0, {64, 3}, [&](std::string& b) {
    b.resize(3 * 2 * 34);
    ggml_quantize_q8_0(a.data(), b.data(), 3 * 64);
  });
  w.add_tensor("odd", GgmlType::f16, {5}, [](std::string& b) { b.assign(10, '\x3c'); });
  w.write(path.string());
  return path;
}

TEST(Gguf, WrittenFileReadsBackKeyForKeyAndByteForByte) {
  const fs::path dir = scratch("gguf_rw");
  const GgufFile f = GgufFile::open(write_sample(dir / "m.gguf").string());
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_string("general.architecture"), "qwen3");
  EXPECT_EQ(f.get_int("qwen3.block_count"), 2);
  EXPECT_EQ(f.get("qwen3.block_count").kind, GgufKind::u32);
  EXPECT_EQ(f.get_float("qwen3.rope.freq_base"), 1e6);
  EXPECT_EQ(f.get("tokenizer.ggml.add_bos_token").i, 0);
  EXPECT_EQ(f.get_int("big"), int64_t{1} << 40);
  EXPECT_EQ(f.get_int("neg"), -5);
  EXPECT_EQ(f.get("tokens").items.at(1).s, "<|x|>");
  EXPECT_EQ(f.get("types").elem, GgufKind::i32);
  EXPECT_EQ(f.metadata().front().first, "general.architecture");  // file order kept
  ASSERT_EQ(f.tensors().size(), 3u);
  const ckpt::GgufTensorInfo& a = *f.find_tensor("a");
  EXPECT_EQ(a.ne, (std::vector<int64_t>{64, 3}));
  EXPECT_EQ(a.bytes, 3u * 64 * 4);
  EXPECT_EQ(std::memcmp(f.data(a), f.data(a), 4), 0);
  EXPECT_FLOAT_EQ(reinterpret_cast<const float*>(f.data(a))[5], std::sin(5.0f));
  for (const auto& t : f.tensors()) EXPECT_EQ(t.offset % 32, 0u) << t.name;  // the format's alignment
  EXPECT_EQ(f.find_tensor("q")->bytes, 3u * 2 * 34);
  EXPECT_THROW(f.get_string("qwen3.block_count"), Error);
  try {
    f.get("absent.key");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("absent.key"), std::string::npos);
  }
  fs::remove_all(dir);
}

std::string expect_refused(std::string_view bytes, const std::string& needle) {
  try {
    (void)GgufFile::parse(bytes, "bad.gguf");
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("bad.gguf"), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    return what;
  }
  ADD_FAILURE() << "accepted a damaged file (" << needle << ")";
  return "";
}

TEST(Gguf, DamagedFilesAreOneLineNamingTheFileAndPart) {
  const fs::path dir = scratch("gguf_bad");
  const std::string good = ckpt::read_file_bytes(write_sample(dir / "m.gguf").string());
  (void)GgufFile::parse(good, "good.gguf");
  expect_refused("", "GGUF magic");
  expect_refused("GGML" + good.substr(4), "GGUF magic");
  std::string v1 = good;
  v1[4] = 1;
  expect_refused(v1, "version 1");
  // Truncated anywhere: in the header, in a key, in the tensor infos, in the data.
  for (const size_t cut : {size_t{10}, size_t{30}, size_t{120}, good.size() - 300, good.size() - 25}) {
    expect_refused(std::string_view(good).substr(0, cut), "truncated");
  }
  // A key count beyond the file is refused before anything is allocated.
  std::string counts = good;
  const uint64_t huge = uint64_t{1} << 60;
  std::memcpy(counts.data() + 16, &huge, 8);
  expect_refused(counts, "more than the file holds");
  // An unknown tensor type: the type field of tensor "odd" (its name, one dim, then the type).
  std::string type = good;
  const size_t odd = type.rfind(std::string("odd"));
  const uint32_t unknown = 99;
  std::memcpy(type.data() + odd + 3 + 4 + 8, &unknown, 4);
  expect_refused(type, "ggml type 99");
  // A misaligned tensor offset.
  std::string offset = good;
  const uint64_t bad_offset = 7;
  std::memcpy(offset.data() + odd + 3 + 4 + 8 + 4, &bad_offset, 8);
  expect_refused(offset, "not a multiple of the alignment");
  fs::remove_all(dir);
}

// The format's definition, by hand: a q4_0 block with d = 1 and nibbles 0..15 holds -8..7; q8_0
// holds q * d; q8_0's encoder rounds half away from zero with d = amax / 127 (ggml's reference).
TEST(GgmlBlocks, DecodersFollowTheFormat) {
  uint8_t q4[18];
  const uint16_t one = f32_to_f16(1.0f);
  std::memcpy(q4, &one, 2);
  for (int j = 0; j < 16; ++j) q4[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  ggml_dequantize_row(GgmlType::q4_0, q4, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], static_cast<float>(j - 8));
    EXPECT_EQ(y[16 + j], static_cast<float>(7 - j));
  }
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16) * 0.25f;  // amax 4: d = 4 / 127
  uint8_t q8[34];
  ggml_quantize_q8_0(x.data(), q8, 32);
  const float d = f16_to_f32(f32_to_f16(4.0f / 127.0f));
  ggml_dequantize_row(GgmlType::q8_0, q8, y, 32);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(static_cast<int8_t>(q8[2 + j]), static_cast<int8_t>(std::round(x[j] * (127.0f / 4.0f)))) << j;
    EXPECT_EQ(y[j], static_cast<float>(static_cast<int8_t>(q8[2 + j])) * d);
  }
  EXPECT_THROW(ggml_dequantize_row(GgmlType::q4_k, q4, y, 32), Error);  // not a whole 256-block
}

TEST(GgmlBlocks, DecodersEqualTheGgufPackageBitForBit) {
  const fs::path dir = testing::source_path("tests/fixtures/gguf/quant_types");
  const GgufFile f = GgufFile::open((dir / "quant_types.gguf").string());
  const auto want = ckpt::SafetensorsFile::open((dir / "dequant.safetensors").string());
  int checked = 0;
  for (const ckpt::GgufTensorInfo& t : f.tensors()) {
    const Tensor expected = want.get(t.name);
    ASSERT_EQ(expected.numel(), t.numel()) << t.name;
    std::vector<float> got(static_cast<size_t>(t.numel()));
    const uint64_t row_bytes = ggml_row_bytes(ggml_type_info(t.type), t.ne[0]);
    for (int64_t r = 0; r < t.rows(); ++r) {
      ggml_dequantize_row(t.type, f.data(t) + r * row_bytes, got.data() + r * t.ne[0], t.ne[0]);
    }
    EXPECT_EQ(std::memcmp(got.data(), expected.data<float>(), got.size() * 4), 0) << t.name;
    ++checked;
  }
  EXPECT_EQ(checked, 11);  // f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q4_K q5_K q6_K
}

}  // namespace
}  // namespace titan
