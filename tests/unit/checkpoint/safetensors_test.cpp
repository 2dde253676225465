// safetensors read/write: round trips of every dtype, one test per malformed-input class (files
// written byte by byte here), atomic-write guarantees, and the Hugging Face fixtures (written by
// the safetensors Python library, an independent writer) checked against config.json and against
// a minimal parser written in this file.
#include "titan/checkpoint/safetensors.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "ops/op_harness.h"
#include "titan/checkpoint/atomic_file.h"
#include "titan/checkpoint/json_file.h"
#include "unit/checkpoint/checkpoint_test_util.h"

namespace titan::ckpt {
namespace {

using testing::le64;
using testing::TempDir;
using testing::throws_error;
using testing::write_bytes;

template <class T>
Tensor make(const Shape& shape, DType dtype, const std::vector<T>& values) {
  Tensor t = Tensor::empty(shape, dtype);
  EXPECT_EQ(static_cast<size_t>(t.numel()), values.size());
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(T));
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.nbytes() == cb.nbytes() &&
         (ca.nbytes() == 0 || std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()) == 0);
}

// ---------------------------------------------------------------------------------------------
// Round trips

TEST(Safetensors, RoundTripEveryDtypeScalarEmptyAndStrided) {
  TempDir dir;
  Tensor grid = make<float>({3, 4}, DType::f32, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"f32", make<float>({2, 3}, DType::f32, {-1.5f, 0.f, 1e-30f, 3.f, -0.f, 1e30f})},
      {"bf16", make<uint16_t>({5}, DType::bf16,
                              {f32_to_bf16(1.f), f32_to_bf16(-2.5f), f32_to_bf16(3.14159f), 0, 0x7fc0})},
      {"f16", make<uint16_t>({3, 1}, DType::f16, {f32_to_f16(0.5f), f32_to_f16(-65504.f), f32_to_f16(1e-5f)})},
      {"i32", make<int32_t>({4}, DType::i32, {-1, 0, 7, INT32_MAX})},
      {"i64", make<int64_t>({2, 2}, DType::i64, {INT64_MIN, -100, 0, int64_t{1} << 40})},
      {"scalar", make<float>({}, DType::f32, {3.25f})},
      {"empty", make<float>({0, 4}, DType::f32, {})},
      {"empty_i64", make<int64_t>({0}, DType::i64, {})},
      {"strided", grid.narrow(1, 1, 2)},  // [3, 2] view with row stride 4
  };
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"step", "7"}};
  const std::string path = dir.file("all.safetensors");
  write_safetensors(path, tensors, meta);

  SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(f.metadata(), meta);
  ASSERT_EQ(f.tensors().size(), tensors.size());
  for (size_t i = 1; i < f.tensors().size(); ++i) EXPECT_LT(f.tensors()[i - 1].name, f.tensors()[i].name);
  for (const auto& [name, want] : tensors) {
    SCOPED_TRACE(name);
    const TensorInfo* info = f.find(name);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->dtype, want.dtype());
    EXPECT_EQ(info->shape, want.shape());
    EXPECT_EQ(info->end - info->begin, want.nbytes());
    Tensor got = f.get(name);
    EXPECT_EQ(got.dtype(), want.dtype());
    EXPECT_EQ(got.shape(), want.shape());
    EXPECT_TRUE(got.is_contiguous());
    EXPECT_TRUE(same_bytes(got, want));
    // Our writer aligns every tensor, so reads are zero-copy views: the same address twice.
    if (got.numel() > 0) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(got.raw_data()) % dtype_size(got.dtype()), 0u);
      EXPECT_EQ(got.raw_data(), f.get(name).raw_data());
    }
  }
  EXPECT_EQ(f.find("absent"), nullptr);
  EXPECT_EQ(f.get("scalar").ndim(), 0);
  EXPECT_EQ(f.get("scalar").data<float>()[0], 3.25f);

  // The layout the format (and other readers) expect, checked on the raw bytes: an 8-aligned
  // header of JSON padded with spaces, and data exactly covering the rest of the file.
  const std::string bytes = testing::read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(header["scalar"]["shape"], nlohmann::json::array());
  EXPECT_EQ(header["__metadata__"]["step"], "7");
  uint64_t total = 0;
  for (const auto& [name, t] : tensors) total += t.nbytes();
  EXPECT_EQ(bytes.size(), 8 + n + total);
}

TEST(Safetensors, ViewsOutliveTheFileObjectAndNeverWriteTheFile) {
  TempDir dir;
  const std::string path = dir.file("a.safetensors");
  write_safetensors(path, {{"w", make<float>({3}, DType::f32, {1.f, 2.f, 3.f})}});
  Tensor w;
  {
    SafetensorsFile f = SafetensorsFile::open(path);
    w = f.get("w");
  }  // the mapping must stay alive through the tensor's keepalive
  EXPECT_EQ(w.data<float>()[2], 3.f);
  w.data<float>()[0] = 42.f;  // copy-on-write: this process only
  EXPECT_EQ(SafetensorsFile::open(path).get("w").data<float>()[0], 1.f);
}

// How many of the pages spanning [p, p + bytes) this process has mapped (/proc/self/pagemap: bit
// 63 of each page's entry says "present").
int64_t present_pages(const void* p, size_t bytes) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = reinterpret_cast<uintptr_t>(p) / page, end = (reinterpret_cast<uintptr_t>(p) + bytes + page - 1) / page;
  const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0);
  std::vector<uint64_t> entries(end - first);
  const auto want = static_cast<ssize_t>(entries.size() * 8);
  EXPECT_EQ(::pread(fd, entries.data(), static_cast<size_t>(want), static_cast<off_t>(first * 8)), want);
  ::close(fd);
  int64_t present = 0;
  for (const uint64_t entry : entries) present += static_cast<int64_t>(entry >> 63);
  return present;
}

// A tensor read in place gives its pages back (a frozen embedding after its lookup) and reads the
// same values again; allocator memory is never given back this way.
TEST(Safetensors, ReleasedFilePagesComeBackWithTheSameValues) {
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  const int64_t n = 1 << 20;  // 4 MiB
  Tensor src = Tensor::empty({n});
  for (int64_t i = 0; i < n; ++i) src.data<float>()[i] = 0.5f * static_cast<float>(i % 9973);
  write_safetensors(path, {{"w", src}});
  const Tensor w = SafetensorsFile::open(path).get("w");
  ASSERT_TRUE(w.reads_file());
  ASSERT_TRUE(same_bytes(w, src));  // every page read
  const int64_t pages = present_pages(w.raw_data(), w.nbytes());
  EXPECT_GE(pages, 1024);
  w.release_file_pages();
  EXPECT_LE(present_pages(w.raw_data(), w.nbytes()), 2);  // the edge pages it shares stay
  EXPECT_TRUE(same_bytes(w, src));
  const Tensor own = src.clone();
  EXPECT_FALSE(own.reads_file());
  own.release_file_pages();
  EXPECT_TRUE(same_bytes(own, src));
}

TEST(Safetensors, MisalignedDataIsCopiedNotViewed) {
  // Another writer may leave the header length odd; an f32 then starts at an odd address.
  TempDir dir;
  std::string header = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  while ((8 + header.size()) % 4 != 1) header += ' ';
  const float values[2] = {1.25f, -7.f};
  write_bytes(dir.file("odd.safetensors"),
              le64(header.size()) + header + std::string(reinterpret_cast<const char*>(values), 8));
  Tensor x = SafetensorsFile::open(dir.file("odd.safetensors")).get("x");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(x.raw_data()) % 4, 0u);
  EXPECT_FALSE(x.reads_file());
  EXPECT_EQ(x.data<float>()[0], 1.25f);
  EXPECT_EQ(x.data<float>()[1], -7.f);
}

// ---------------------------------------------------------------------------------------------
// Malformed files: each one is written by hand and must fail at open() with one line naming the
// file and (where there is one) the key.

struct BadFile {
  const char* name;
  std::string bytes;
  std::vector<std::string> parts;  // expected in the message besides the file path
};

std::string st(const std::string& header, const std::string& data = "") {
  return le64(header.size()) + header + data;
}
std::string entry(const std::string& fields) { return R"({"w":{)" + fields + "}}"; }

std::vector<BadFile> bad_files() {
  const std::string d4(4, 'x'), d8(8, 'x'), d12(12, 'x'), d16(16, 'x');
  return {
      {"empty", "", {"0 bytes, shorter than the 8-byte header length"}},
      {"short", "abc", {"3 bytes, shorter than the 8-byte"}},
      {"header_past_end", le64(1000) + "{}", {"header length 1000 runs past the end of the file (10 bytes)"}},
      {"header_absurd", le64(uint64_t{1} << 62) + "{}", {"exceeds the 100000000-byte limit"}},
      {"header_empty", le64(0), {"invalid JSON", "line 1, column 1"}},
      {"not_json", st("{\"w\": nope}"), {"invalid JSON", "line 1, column"}},
      {"not_object", st("[1, 2]"), {"header must be a JSON object, got array"}},
      {"entry_not_object", st(R"({"w": 5})"), {"\"w\"", "expected an object", "got number"}},
      {"missing_dtype", st(entry(R"("shape":[1],"data_offsets":[0,4])"), d4), {"\"w\"", "missing \"dtype\""}},
      {"missing_shape", st(entry(R"("dtype":"F32","data_offsets":[0,4])"), d4), {"\"w\"", "missing \"shape\""}},
      {"missing_offsets", st(entry(R"("dtype":"F32","shape":[1])"), d4), {"\"w\"", "missing \"data_offsets\""}},
      {"dtype_not_string", st(entry(R"("dtype":4,"shape":[1],"data_offsets":[0,4])"), d4),
       {"\"w\"", "\"dtype\" must be a string, got number"}},
      {"dtype_f64", st(entry(R"("dtype":"F64","shape":[1],"data_offsets":[0,8])"), d8),
       {"unsupported dtype F64 for tensor \"w\"", "supported: F32, BF16, F16, I32, I64, U8, I8"}},
      {"dtype_bool", st(entry(R"("dtype":"BOOL","shape":[4],"data_offsets":[0,4])"), d4),
       {"unsupported dtype BOOL for tensor \"w\""}},
      {"dtype_unknown", st(entry(R"("dtype":"Q7","shape":[1],"data_offsets":[0,4])"), d4),
       {"unsupported dtype Q7 for tensor \"w\""}},
      {"shape_not_array", st(entry(R"("dtype":"F32","shape":4,"data_offsets":[0,16])"), d16),
       {"\"w\"", "\"shape\" must be an array, got number"}},
      {"shape_negative", st(entry(R"("dtype":"F32","shape":[-1],"data_offsets":[0,4])"), d4),
       {"\"w\"", "non-negative integers, found -1"}},
      {"shape_fraction", st(entry(R"("dtype":"F32","shape":[1.5],"data_offsets":[0,4])"), d4),
       {"\"w\"", "non-negative integers, found 1.5"}},
      {"shape_string", st(entry(R"("dtype":"F32","shape":["1"],"data_offsets":[0,4])"), d4),
       {"\"w\"", "non-negative integers, found \"1\""}},
      {"offsets_not_array", st(entry(R"("dtype":"F32","shape":[1],"data_offsets":"0-4")"), d4),
       {"\"w\"", "must be [begin, end]"}},
      {"offsets_three", st(entry(R"("dtype":"F32","shape":[1],"data_offsets":[0,4,8])"), d8),
       {"\"w\"", "must be [begin, end]", "[0,4,8]"}},
      {"offsets_negative", st(entry(R"("dtype":"F32","shape":[1],"data_offsets":[-4,0])"), d4),
       {"\"w\"", "must be [begin, end]"}},
      {"offsets_reversed", st(entry(R"("dtype":"F32","shape":[1],"data_offsets":[4,0])"), d4),
       {"\"w\"", "[4, 0] has begin > end"}},
      {"truncated", st(entry(R"("dtype":"F32","shape":[4],"data_offsets":[0,16])"), d8),
       {"\"w\"", "end 16 is beyond the data section (8 bytes)", "truncated"}},
      {"length_mismatch", st(entry(R"("dtype":"F32","shape":[3],"data_offsets":[0,16])"), d16),
       {"\"w\"", "16 bytes in data_offsets", "F32[3] needs 12 bytes"}},
      {"shape_overflow", st(entry(R"("dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,4])"), d4),
       {"\"w\"", "4 bytes in data_offsets", "needs more than 2^64 bytes"}},
      {"overlap", st(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                     R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", d12),
       {"\"b\"", "overlap tensor \"a\""}},
      {"hole", st(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                  R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", d12),
       {"unused bytes [4, 8) before tensor \"b\""}},
      {"trailing", st(entry(R"("dtype":"F32","shape":[1],"data_offsets":[0,4])"), d8),
       {"8 bytes but tensors cover only 4", "trailing"}},
      {"duplicate_key", st(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                           R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", d8),
       {"duplicate key \"w\""}},
      {"metadata_not_object", st(R"({"__metadata__": 5})"), {"\"__metadata__\" must be an object"}},
      {"metadata_not_string", st(R"({"__metadata__": {"step": 7}})"), {"__metadata__ \"step\" must be a string"}},
      // Found by tests/fuzz/safetensors_fuzz: nlohmann reports a number beyond double as
      // out_of_range, not parse_error, and it escaped parse_json_strict as a raw nlohmann exception.
      {"number_overflow", st(entry(R"("dtype":"F32","shape":[1e999],"data_offsets":[0,4])"), d4),
       {"invalid JSON", "number overflow parsing '1e999'"}},
  };
}

class SafetensorsBadFile : public ::testing::TestWithParam<BadFile> {};

TEST_P(SafetensorsBadFile, FailsAtOpenWithOneLineNamingFileAndKey) {
  TempDir dir;
  const std::string path = dir.file(std::string(GetParam().name) + ".safetensors");
  write_bytes(path, GetParam().bytes);
  std::vector<std::string> parts = GetParam().parts;
  parts.push_back(path);
  EXPECT_TRUE(throws_error([&] { SafetensorsFile::open(path); }, parts));
}

// parse_header (the in-memory entry point the fuzzer uses) is the same code: same errors.
TEST_P(SafetensorsBadFile, ParseHeaderFromMemoryFailsTheSame) {
  std::vector<std::string> parts = GetParam().parts;
  parts.push_back("mem.safetensors");
  EXPECT_TRUE(throws_error([&] { SafetensorsFile::parse_header(GetParam().bytes, "mem.safetensors"); }, parts));
}

INSTANTIATE_TEST_SUITE_P(Malformed, SafetensorsBadFile, ::testing::ValuesIn(bad_files()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Safetensors, ParseHeaderFromMemoryMatchesOpen) {
  TempDir dir;
  const std::string path = dir.file("two.safetensors");
  write_safetensors(path, {{"w", make<float>({2}, DType::f32, {1.f, 2.f})}, {"i", make<int64_t>({1}, DType::i64, {7})}},
                    {{"step", "3"}});
  const std::string bytes = read_file_bytes(path);
  const SafetensorsHeader h = SafetensorsFile::parse_header(bytes, path);
  const SafetensorsFile f = SafetensorsFile::open(path);
  ASSERT_EQ(h.tensors.size(), f.tensors().size());
  for (size_t i = 0; i < h.tensors.size(); ++i) {
    EXPECT_EQ(h.tensors[i].name, f.tensors()[i].name);
    EXPECT_EQ(h.tensors[i].dtype, f.tensors()[i].dtype);
    EXPECT_EQ(h.tensors[i].shape, f.tensors()[i].shape);
    EXPECT_EQ(h.tensors[i].begin, f.tensors()[i].begin);
    EXPECT_EQ(h.tensors[i].end, f.tensors()[i].end);
  }
  EXPECT_EQ(h.metadata, f.metadata());
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  EXPECT_EQ(h.data_offset, 8 + header_len);
  EXPECT_EQ(h.data_offset + 16, bytes.size());  // i64[1] + f32[2]
}

TEST(Safetensors, MissingFileDirectoryAndAbsentKey) {
  TempDir dir;
  EXPECT_TRUE(throws_error([&] { SafetensorsFile::open(dir.file("nope.safetensors")); },
                           {dir.file("nope.safetensors"), "No such file or directory"}));
  EXPECT_TRUE(throws_error([&] { SafetensorsFile::open(dir.path()); }, {dir.path(), "not a regular file"}));
  const std::string path = dir.file("one.safetensors");
  write_safetensors(path, {{"w", make<float>({1}, DType::f32, {1.f})}});
  SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_TRUE(throws_error([&] { f.get("model.norm.weight"); }, {path, "no tensor \"model.norm.weight\""}));
}

// ---------------------------------------------------------------------------------------------
// Atomic writes

TEST(SafetensorsWrite, MissingDirectoryIsAClearErrorAndCreatesNothing) {
  TempDir dir;
  const std::string path = dir.file("no_such_dir/x.safetensors");
  EXPECT_TRUE(throws_error(
      [&] { write_safetensors(path, {{"w", make<float>({1}, DType::f32, {1.f})}}); },
      {path, "No such file or directory", "HINT"}));
  EXPECT_TRUE(dir.entries().empty());
}

TEST(SafetensorsWrite, FailedWriteKeepsTheExistingFileAndLeavesNoTmp) {
  TempDir dir;
  const std::string path = dir.file("keep.safetensors");
  write_safetensors(path, {{"w", make<float>({2}, DType::f32, {1.f, 2.f})}});
  const std::string before = testing::read_bytes(path);

  // Rejected inputs: undefined tensor, duplicate and reserved names.
  EXPECT_TRUE(throws_error([&] { write_safetensors(path, {{"w", Tensor()}}); }, {path, "\"w\" is undefined"}));
  const Tensor one = make<float>({1}, DType::f32, {5.f});
  EXPECT_TRUE(throws_error([&] { write_safetensors(path, {{"a", one}, {"a", one}}); },
                           {path, "duplicate tensor name \"a\""}));
  EXPECT_TRUE(throws_error([&] { write_safetensors(path, {{"__metadata__", one}}); }, {path, "invalid tensor name"}));
  // f64 (host reductions only, dtype.h) is refused on write as it is on read.
  EXPECT_TRUE(throws_error([&] { write_safetensors(path, {{"d", Tensor::zeros({2}, DType::f64)}}); },
                           {path, "\"d\" is f64, which titan does not store (supported: F32, BF16, F16, I32, I64, U8, I8)"}));

  // A failure halfway through the stream (after more than the 1 MiB buffer has hit the disk).
  EXPECT_THROW(write_file_atomic(path,
                                 [](std::ostream& os) {
                                   os << std::string(3 << 20, 'z');
                                   throw titan::Error("disk on fire");
                                 }),
               titan::Error);

  EXPECT_EQ(testing::read_bytes(path), before);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"keep.safetensors"});
  EXPECT_EQ(SafetensorsFile::open(path).get("w").data<float>()[1], 2.f);
}

TEST(SafetensorsWrite, SuccessfulWriteReplacesTheFile) {
  TempDir dir;
  const std::string path = dir.file("r.safetensors");
  write_safetensors(path, {{"old", make<float>({1}, DType::f32, {1.f})}});
  write_safetensors(path, {{"new", make<int32_t>({2}, DType::i32, {3, 4})}});
  SafetensorsFile f = SafetensorsFile::open(path);
  ASSERT_EQ(f.tensors().size(), 1u);
  EXPECT_EQ(f.tensors()[0].name, "new");
  EXPECT_EQ(f.get("new").data<int32_t>()[1], 4);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"r.safetensors"});

  write_text_file_atomic(dir.file("c.json"), R"({"a": [1, 2]})");
  EXPECT_EQ(read_json_file(dir.file("c.json"))["a"][1], 2);
}

// ---------------------------------------------------------------------------------------------
// Files written by Hugging Face's safetensors library (tests/fixtures/hf/*/): names and shapes
// follow from config.json; bytes match a minimal independent parse of the same file.

// The tensors a Qwen3ForCausalLM with this config must have, with their shapes (HF layout).
std::map<std::string, Shape> qwen3_expected_shapes(const nlohmann::json& c) {
  const int64_t V = c["vocab_size"], H = c["hidden_size"], I = c["intermediate_size"];
  const int64_t nh = c["num_attention_heads"], nkv = c["num_key_value_heads"], hd = c["head_dim"];
  std::map<std::string, Shape> out = {{"model.embed_tokens.weight", {V, H}}, {"model.norm.weight", {H}}};
  if (!c.value("tie_word_embeddings", false)) out["lm_head.weight"] = {V, H};
  for (int l = 0; l < c["num_hidden_layers"].get<int>(); ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    out[p + "input_layernorm.weight"] = {H};
    out[p + "post_attention_layernorm.weight"] = {H};
    out[p + "self_attn.q_proj.weight"] = {nh * hd, H};
    out[p + "self_attn.k_proj.weight"] = {nkv * hd, H};
    out[p + "self_attn.v_proj.weight"] = {nkv * hd, H};
    out[p + "self_attn.o_proj.weight"] = {H, nh * hd};
    out[p + "self_attn.q_norm.weight"] = {hd};
    out[p + "self_attn.k_norm.weight"] = {hd};
    out[p + "mlp.gate_proj.weight"] = {I, H};
    out[p + "mlp.up_proj.weight"] = {I, H};
    out[p + "mlp.down_proj.weight"] = {H, I};
    if (c.value("attention_bias", false)) {
      out[p + "self_attn.q_proj.bias"] = {nh * hd};
      out[p + "self_attn.k_proj.bias"] = {nkv * hd};
      out[p + "self_attn.v_proj.bias"] = {nkv * hd};
      out[p + "self_attn.o_proj.bias"] = {H};
    }
  }
  return out;
}

class HfFixture : public ::testing::TestWithParam<std::string> {
 protected:
  std::string file(const std::string& name) const {
    return titan::testing::source_path("tests/fixtures/hf/" + GetParam() + "/" + name);
  }
};

TEST_P(HfFixture, ModelNamesAndShapesFollowConfig) {
  const nlohmann::json config = read_json_file(file("config.json"));
  const auto want = qwen3_expected_shapes(config);
  SafetensorsFile f = SafetensorsFile::open(file("model.safetensors"));
  std::map<std::string, Shape> got;
  for (const auto& t : f.tensors()) {
    got[t.name] = t.shape;
    EXPECT_EQ(t.dtype, DType::f32) << t.name;  // README: float32 weights
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(f.metadata().at("format"), "pt");
}

TEST_P(HfFixture, BytesMatchAnIndependentParse) {
  // Minimal reader straight from the format description: u64 LE header length, JSON header,
  // data_offsets relative to the end of the header.
  const std::string raw = testing::read_bytes(file("model.safetensors"));
  uint64_t n = 0;
  std::memcpy(&n, raw.data(), 8);
  const auto header = nlohmann::json::parse(raw.substr(8, n));
  SafetensorsFile f = SafetensorsFile::open(file("model.safetensors"));
  size_t count = 0;
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") continue;
    ++count;
    const uint64_t begin = e["data_offsets"][0], end = e["data_offsets"][1];
    const Tensor t = f.get(name);
    ASSERT_EQ(t.nbytes(), end - begin) << name;
    EXPECT_EQ(std::memcmp(t.raw_data(), raw.data() + 8 + n + begin, end - begin), 0) << name;
  }
  EXPECT_EQ(count, f.tensors().size());
}

TEST_P(HfFixture, TokensAndExpectedFilesHaveTheDocumentedStructure) {
  // README: input_ids/labels I64 [B, T], labels = input_ids or -100; logits F32 [B, T, V];
  // loss F32 0-dim.
  const int64_t V = read_json_file(file("config.json"))["vocab_size"];
  SafetensorsFile tokens = SafetensorsFile::open(file("tokens.safetensors"));
  const Tensor ids = tokens.get("input_ids"), labels = tokens.get("labels");
  ASSERT_EQ(ids.dtype(), DType::i64);
  ASSERT_EQ(ids.ndim(), 2);
  ASSERT_EQ(labels.shape(), ids.shape());
  for (int64_t i = 0; i < ids.numel(); ++i) {
    const int64_t id = ids.data<int64_t>()[i], label = labels.data<int64_t>()[i];
    EXPECT_TRUE(id >= 0 && id < V) << i;
    EXPECT_TRUE(label == id || label == -100) << i;
  }
  SafetensorsFile expected = SafetensorsFile::open(file("expected.safetensors"));
  const Tensor loss = expected.get("loss");
  EXPECT_EQ(loss.dtype(), DType::f32);
  EXPECT_EQ(loss.ndim(), 0);
  EXPECT_TRUE(std::isfinite(loss.data<float>()[0]) && loss.data<float>()[0] > 0.f);
  EXPECT_EQ(expected.get("logits").shape(), (Shape{ids.size(0), ids.size(1), V}));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HfFixture,
                         ::testing::Values("tied_mha", "untied_gqa2", "gqa4_headdim", "attn_bias"));

}  // namespace
}  // namespace titan::ckpt
