// GGUF files (ggml/docs/gguf.md, version 3; versions 2 and 3 are read), the format of llama.cpp,
// Ollama and LM Studio: a header (magic "GGUF", version, tensor and key counts), typed key/value
// metadata, tensor infos (name, dims ne0..ne[n-1] with ne0 the innermost, ggml type, offset),
// padding to general.alignment (default 32), and the tensor data.
//
// GgufFile reads one: mmap'd, every count, length, offset and size checked against the file before
// anything is allocated or read, so a damaged file is one line naming the file and the key or tensor
// (tests/fuzz/gguf_fuzz.cpp). GgufWriter writes one atomically (a temporary name, then rename).
// What the keys mean for a model, and the tensor names, live in models/decoder/gguf_model.h.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "titan/core/ggml_blocks.h"

namespace titan::ckpt {

// GGUF's value types, numbered as the format numbers them.
enum class GgufKind : uint32_t { u8 = 0, i8, u16, i16, u32, i32, f32, boolean, string, array, u64, i64, f64 };
const char* gguf_kind_name(GgufKind kind);  // "UINT32", "STRING", ... (the gguf package's names)

struct GgufValue {
  GgufKind kind = GgufKind::u32;
  int64_t i = 0;   // every integer kind (u64 values above INT64_MAX are refused) and booleans
  double f = 0;    // f32 and f64
  std::string s;   // string
  GgufKind elem = GgufKind::u8;  // an array's element kind
  std::vector<GgufValue> items;  // an array's elements (arrays of arrays are refused)

  bool is_integer() const;
  bool is_float() const { return kind == GgufKind::f32 || kind == GgufKind::f64; }

  static GgufValue of_u32(uint32_t v) { return integer(GgufKind::u32, v); }
  static GgufValue of_i32(int32_t v) { return integer(GgufKind::i32, v); }
  static GgufValue of_u64(uint64_t v) { return integer(GgufKind::u64, static_cast<int64_t>(v)); }
  static GgufValue of_bool(bool v) { return integer(GgufKind::boolean, v ? 1 : 0); }
  static GgufValue of_f32(float v);
  static GgufValue of_string(std::string v);
  static GgufValue array_of(GgufKind elem, std::vector<GgufValue> items);
  static GgufValue integer(GgufKind kind, int64_t v);
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // ne0 (innermost, a row) first
  GgmlType type = GgmlType::f32;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t bytes = 0;
  int64_t numel() const;
  int64_t rows() const { return ne.empty() ? 1 : numel() / ne[0]; }
};

class GgufFile {
 public:
  static GgufFile open(const std::string& path);
  // The parser open() uses, on a file's bytes (tests, fuzzing); `path` names it in errors.
  static GgufFile parse(std::string_view bytes, const std::string& path);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  // Keys in file order, and lookup by key.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(const std::string& key) const;
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }  // in file order
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  const uint8_t* data(const GgufTensorInfo& t) const { return data_ + t.offset; }
  // Hands a tensor's pages back to the kernel once copied out (safetensors' release).
  void release(const GgufTensorInfo& t) const;

  // Typed reads of a key, each one line naming the file and key when absent or of another kind.
  const GgufValue& get(const std::string& key) const;
  std::string get_string(const std::string& key) const;
  int64_t get_int(const std::string& key) const;     // any integer kind
  double get_float(const std::string& key) const;    // f32/f64, or an integer
  bool has(const std::string& key) const { return find(key) != nullptr; }

 private:
  struct Mapping;
  std::string path_;
  std::shared_ptr<Mapping> mapping_;
  uint32_t version_ = 3;
  uint64_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
  const uint8_t* data_ = nullptr;
};

// Collects metadata and tensors and writes them as one GGUF v3 file (alignment 32, tensors in the
// order added) under "<path>.tmp.<pid>", renamed over `path` once complete.
class GgufWriter {
 public:
  void add(const std::string& key, GgufValue value);
  // `produce` fills the tensor's bytes in `type` (ggml_row_bytes per row), called once while
  // write() streams the file, so a model is never held twice in memory.
  void add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                  std::function<void(std::string& bytes)> produce);
  void write(const std::string& path) const;

 private:
  std::vector<std::pair<std::string, GgufValue>> kv_;
  struct Pending {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    std::function<void(std::string&)> produce;
  };
  std::vector<Pending> tensors_;
};

// True when `path` is a regular file starting with the GGUF magic.
bool is_gguf_file(const std::string& path);

}  // namespace titan::ckpt
