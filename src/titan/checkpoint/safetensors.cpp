#include "titan/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <numeric>

#include "titan/checkpoint/atomic_file.h"
#include "titan/checkpoint/json_file.h"
#include "titan/core/error.h"
#include "titan/core/path_check.h"

namespace titan::ckpt {

// The header length and the data are little-endian; we read them in place.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

// Same limit as the reference implementation: a larger header is corruption, not a model.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kSupported = "F32, BF16, F16, I32, I64, U8, I8";
constexpr const char* kMetadataKey = "__metadata__";

const char* json_type(const nlohmann::json& j) { return j.type_name(); }

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "F32";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::f64: return "F64";  // for messages: neither read nor written (see below)
    case DType::u8: return "U8";
    case DType::i8: return "I8";
  }
  return "?";
}

bool parse_safetensors_dtype(const std::string& name, DType* out) {
  // f64 is not a checkpoint dtype (dtype.h): a file holding F64 is refused as unsupported.
  for (DType d : {DType::f32, DType::bf16, DType::f16, DType::i32, DType::i64, DType::u8, DType::i8}) {
    if (name == safetensors_dtype_name(d)) {
      *out = d;
      return true;
    }
  }
  return false;
}

struct SafetensorsFile::Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr != nullptr) ::munmap(addr, size);
  }
};

namespace {

// One header entry -> TensorInfo; `data_size` bounds the offsets. Every failure names file and key.
TensorInfo parse_entry(const std::string& path, const std::string& key, const nlohmann::json& entry,
                       uint64_t data_size) {
  const std::string where = "[safetensors] " + path + ": tensor \"" + key + "\"";
  TITAN_CHECK(entry.is_object(), where, ": expected an object {dtype, shape, data_offsets}, got ",
              json_type(entry));
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    TITAN_CHECK(entry.contains(field), where, ": missing \"", field, "\"");
  }
  TensorInfo info;
  info.name = key;

  const auto& dtype = entry["dtype"];
  TITAN_CHECK(dtype.is_string(), where, ": \"dtype\" must be a string, got ", json_type(dtype));
  TITAN_CHECK(parse_safetensors_dtype(dtype.get<std::string>(), &info.dtype), "[safetensors] ",
              "unsupported dtype ", dtype.get<std::string>(), " for tensor \"", key, "\" in ", path,
              "; supported: ", kSupported, ". HINT: convert the checkpoint to bf16 or f32");

  // numel is accumulated in unsigned 128 bits so that a hostile shape cannot overflow into a
  // small, plausible byte count.
  const auto& shape = entry["shape"];
  TITAN_CHECK(shape.is_array(), where, ": \"shape\" must be an array, got ", json_type(shape));
  unsigned __int128 numel = 1;
  for (const auto& dim : shape) {
    TITAN_CHECK(dim.is_number_unsigned(), where, ": shape ", shape.dump(),
                " must hold non-negative integers, found ", dim.dump());
    const uint64_t d = dim.get<uint64_t>();
    TITAN_CHECK(d <= static_cast<uint64_t>(INT64_MAX), where, ": dimension ", d, " too large");
    info.shape.push_back(static_cast<int64_t>(d));
    numel *= d;
    if (numel > (static_cast<unsigned __int128>(1) << 64)) numel = static_cast<unsigned __int128>(1) << 64;
  }

  const auto& offsets = entry["data_offsets"];
  TITAN_CHECK(offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() &&
                  offsets[1].is_number_unsigned(),
              where, ": \"data_offsets\" must be [begin, end] with non-negative integers, got ",
              offsets.dump());
  info.begin = offsets[0].get<uint64_t>();
  info.end = offsets[1].get<uint64_t>();
  TITAN_CHECK(info.begin <= info.end, where, ": data_offsets [", info.begin, ", ", info.end,
              "] has begin > end");
  TITAN_CHECK(info.end <= data_size, where, ": data_offsets end ", info.end,
              " is beyond the data section (", data_size, " bytes). HINT: the file is truncated");
  const unsigned __int128 want = numel * dtype_size(info.dtype);
  TITAN_CHECK(want == info.end - info.begin, where, ": ", info.end - info.begin, " bytes in data_offsets, but ",
              safetensors_dtype_name(info.dtype), shape_str(info.shape), " needs ",
              want > UINT64_MAX ? std::string("more than 2^64") : std::to_string(static_cast<uint64_t>(want)),
              " bytes");
  return info;
}

// The format requires the data section to be covered exactly once, in any order (the reference
// reader rejects holes and trailing bytes too: they could smuggle a second file format).
void check_layout(const std::string& path, const std::vector<TensorInfo>& tensors, uint64_t data_size) {
  std::vector<const TensorInfo*> by_offset;
  for (const auto& t : tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo* t : by_offset) {
    TITAN_CHECK(t->begin >= covered, "[safetensors] ", path, ": tensor \"", t->name, "\" bytes [",
                t->begin, ", ", t->end, ") overlap tensor \"", prev ? prev->name : "", "\" bytes [",
                prev ? prev->begin : 0, ", ", covered, ")");
    TITAN_CHECK(t->begin == covered, "[safetensors] ", path, ": unused bytes [", covered, ", ",
                t->begin, ") before tensor \"", t->name,
                "\"; the format requires the data section to be fully covered");
    covered = t->end;
    prev = t;
  }
  TITAN_CHECK(covered == data_size, "[safetensors] ", path, ": data section has ", data_size,
              " bytes but tensors cover only ", covered,
              "; the format does not allow trailing bytes");
}

}  // namespace

SafetensorsHeader SafetensorsFile::parse_header(std::string_view file, const std::string& path) {
  const uint64_t size = file.size();
  TITAN_CHECK(size >= 8, "[safetensors] ", path, ": file is ", size,
              " bytes, shorter than the 8-byte header length. HINT: truncated or not a safetensors file");
  const char* base = file.data();
  uint64_t header_len = 0;
  std::memcpy(&header_len, base, 8);
  TITAN_CHECK(header_len <= kMaxHeaderBytes, "[safetensors] ", path, ": header length ", header_len,
              " exceeds the ", kMaxHeaderBytes, "-byte limit. HINT: corrupt or not a safetensors file");
  TITAN_CHECK(header_len <= size - 8, "[safetensors] ", path, ": header length ", header_len,
              " runs past the end of the file (", size, " bytes). HINT: truncated or not a safetensors file");
  const uint64_t data_size = size - 8 - header_len;

  SafetensorsHeader h;
  h.data_offset = 8 + header_len;
  const nlohmann::json header =
      parse_json_strict(std::string_view(base + 8, header_len), path + " (safetensors header)");
  TITAN_CHECK(header.is_object(), "[safetensors] ", path, ": header must be a JSON object, got ",
              json_type(header));
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      TITAN_CHECK(value.is_object(), "[safetensors] ", path, ": \"__metadata__\" must be an object, got ",
                  json_type(value));
      for (const auto& [mkey, mvalue] : value.items()) {
        TITAN_CHECK(mvalue.is_string(), "[safetensors] ", path, ": __metadata__ \"", mkey,
                    "\" must be a string, got ", json_type(mvalue));
        h.metadata[mkey] = mvalue.get<std::string>();
      }
      continue;
    }
    h.tensors.push_back(parse_entry(path, key, value, data_size));
  }
  check_layout(path, h.tensors, data_size);
  std::sort(h.tensors.begin(), h.tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  return h;
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  f.path_ = path;
  std::string problem;
  const int fd = open_regular_file(path, &problem);
  TITAN_CHECK(fd >= 0, "[safetensors] cannot open ", path, ": ", problem);
  struct stat st {};
  TITAN_CHECK(::fstat(fd, &st) == 0, "[safetensors] cannot open ", path, ": ", std::strerror(errno));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  std::string_view file;  // an empty file is not mapped (mmap rejects length 0); parse_header reports it
  if (size > 0) {
    // Private + writable: views can be written without SIGSEGV, and the writes never reach the file.
    void* addr = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    const int map_errno = errno;
    ::close(fd);  // the mapping keeps its own reference to the file
    TITAN_CHECK(addr != MAP_FAILED, "[safetensors] cannot map ", path, " (", size, " bytes): ",
                std::strerror(map_errno));
    f.mapping_ = std::make_shared<Mapping>();
    f.mapping_->addr = addr;
    f.mapping_->size = size;
    file = std::string_view(static_cast<const char*>(addr), size);
  } else {
    ::close(fd);
  }
  SafetensorsHeader h = parse_header(file, path);
  f.data_ = file.data() + h.data_offset;
  f.tensors_ = std::move(h.tensors);
  f.metadata_ = std::move(h.metadata);
  return f;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const TensorInfo& t, const std::string& n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

Tensor SafetensorsFile::get(const std::string& name) const {
  const TensorInfo* info = find(name);
  TITAN_CHECK(info != nullptr, "[safetensors] ", path_, ": no tensor \"", name, "\" (the file holds ",
              tensors_.size(), " tensors)");
  char* ptr = const_cast<char*>(data_) + info->begin;
  const size_t elem = dtype_size(info->dtype);
  if (reinterpret_cast<uintptr_t>(ptr) % elem == 0) {
    return Tensor::wrap(ptr, info->shape, info->dtype, mapping_, /*file_pages=*/true);
  }
  // Kernels may use aligned loads on typed pointers; hand them an aligned copy instead.
  Tensor t = Tensor::empty(info->shape, info->dtype);
  std::memcpy(t.raw_data(), ptr, info->end - info->begin);
  return t;
}

void SafetensorsFile::release(const std::string& name) const {
  const TensorInfo* info = find(name);
  if (info == nullptr || info->end == info->begin) return;
  // Clean pages of a read-only mapping: dropping them loses nothing (a later read faults them in
  // from the file again), and a neighbour sharing an edge page is re-read the same way.
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data_ + info->begin) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(data_ + info->end);
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  for (const auto& [name, t] : tensors) {
    TITAN_CHECK(!name.empty() && name != kMetadataKey, "[safetensors] writing ", path,
                ": invalid tensor name \"", name, "\"");
    TITAN_CHECK(t.defined(), "[safetensors] writing ", path, ": tensor \"", name, "\" is undefined");
    TITAN_CHECK(t.device() == Device::cpu, "[safetensors] writing ", path, ": tensor \"", name,
                "\" is on ", device_name(t.device()), ". HINT: copy it to the CPU first");
    TITAN_CHECK(t.dtype() != DType::f64, "[safetensors] writing ", path, ": tensor \"", name,
                "\" is f64, which titan does not store (supported: ", kSupported,
                "). HINT: copy the values into an f32 tensor");
  }
  // Largest element first, then by name: with an 8-aligned data start every tensor is aligned.
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const size_t sa = dtype_size(tensors[a].second.dtype()), sb = dtype_size(tensors[b].second.dtype());
    return sa != sb ? sa > sb : tensors[a].first < tensors[b].first;
  });
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (size_t i : order) {
    const auto& [name, t] = tensors[i];
    TITAN_CHECK(!header.contains(name), "[safetensors] writing ", path, ": duplicate tensor name \"",
                name, "\"");
    header[name] = {{"dtype", safetensors_dtype_name(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    TITAN_FAIL("[safetensors] writing ", path, ": cannot encode the header (names and metadata must be "
               "UTF-8): ", e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned

  write_file_atomic(path, [&](std::ostream& os) {
    const uint64_t n = text.size();
    os.write(reinterpret_cast<const char*>(&n), 8);
    os.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (size_t i : order) {
      const Tensor c = tensors[i].second.contiguous();  // one copy at a time, only if strided
      if (c.nbytes() > 0) os.write(static_cast<const char*>(c.raw_data()), static_cast<std::streamsize>(c.nbytes()));
    }
  });
}

}  // namespace titan::ckpt
