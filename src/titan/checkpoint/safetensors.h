// safetensors files (https://github.com/huggingface/safetensors): an 8-byte little-endian header
// length N, N bytes of JSON header {"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
// "__metadata__": {str: str}}, then the data section; offsets are relative to its start.
//
// Reading maps the file (MAP_PRIVATE) and validates the whole header up front, so a bad file fails
// at open() with one line naming the file and key, never later in a kernel. Tensors are
// zero-copy views that keep the mapping alive. The file is never modified: the pages are
// copy-on-write, so writing into a view changes only this process's copy.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "titan/core/tensor.h"

namespace titan::ckpt {

struct TensorInfo {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  uint64_t begin = 0, end = 0;  // byte offsets in the data section, [begin, end)
};

// "F32" <-> DType::f32 etc. Parsing an unsupported or unknown string returns false.
const char* safetensors_dtype_name(DType dtype);
bool parse_safetensors_dtype(const std::string& name, DType* out);

// A validated header: what open() knows about a file before touching any tensor data.
struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;  // in name order
  std::map<std::string, std::string> metadata;
  uint64_t data_offset = 0;  // where the data section starts in the file (8 + header length)
};

class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);
  // The parser open() uses, on the whole file's bytes in memory (tests, fuzzing); `path` names
  // the file in errors. Throws titan::Error for any malformed input, as open() does.
  static SafetensorsHeader parse_header(std::string_view file, const std::string& path);

  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in name order
  const TensorInfo* find(const std::string& name) const;               // nullptr if absent
  // A view in the file's dtype; a copy when the data is misaligned for its dtype (a header length
  // that is not a multiple of 8, from other writers). Throws naming file and key if absent.
  Tensor get(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Drops `name`'s pages from this process's memory once its data has been copied out (a later
  // get() reads them from the file again): a loader that releases each tensor after its copy holds
  // about one tensor of a many-GB file resident, not all of it.
  void release(const std::string& name) const;

 private:
  struct Mapping;
  std::string path_;
  std::shared_ptr<Mapping> mapping_;
  const char* data_ = nullptr;  // start of the data section inside the mapping
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Writes atomically (write_file_atomic). Tensors may be strided (written contiguous) and of any
// dtype; 0-dim and empty tensors are fine. Data is laid out by dtype size (largest first), then
// name, after a header padded with spaces to a multiple of 8, so every tensor is naturally aligned
// for a zero-copy read (the order Hugging Face's writer uses too).
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace titan::ckpt
