#include "titan/checkpoint/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <sstream>

#include "titan/checkpoint/atomic_file.h"
#include "titan/core/error.h"
#include "titan/core/path_check.h"

namespace titan::ckpt {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint32_t kMaxDims = 4;         // GGML_MAX_DIMS

size_t kind_size(GgufKind kind) {
  switch (kind) {
    case GgufKind::u8: case GgufKind::i8: case GgufKind::boolean: return 1;
    case GgufKind::u16: case GgufKind::i16: return 2;
    case GgufKind::u32: case GgufKind::i32: case GgufKind::f32: return 4;
    case GgufKind::u64: case GgufKind::i64: case GgufKind::f64: return 8;
    case GgufKind::string: return 8;  // at least its length
    case GgufKind::array: return 12;
  }
  return 0;
}

// A bounds-checked cursor over the file; every failure names the file and what was being read.
class Reader {
 public:
  Reader(std::string_view bytes, const std::string& path) : bytes_(bytes), path_(path) {}

  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string string(const std::string& what) {
    const uint64_t n = read<uint64_t>(what + " (its length)");
    need(n, what);
    std::string s(bytes_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  void need(uint64_t n, const std::string& what) const {
    TITAN_CHECK(n <= bytes_.size() - pos_, "[gguf] ", path_, ": ", what, " needs ", n, " bytes at offset ", pos_,
                " but the file ends at ", bytes_.size(), ". HINT: the file is truncated or not a GGUF file; "
                "download it again");
  }
  uint64_t remaining() const { return bytes_.size() - pos_; }
  uint64_t pos() const { return pos_; }

 private:
  std::string_view bytes_;
  const std::string& path_;
  uint64_t pos_ = 0;
};

GgufValue read_value(Reader& r, GgufKind kind, const std::string& what, const std::string& path, bool in_array) {
  GgufValue v;
  v.kind = kind;
  switch (kind) {
    case GgufKind::u8: v.i = r.read<uint8_t>(what); break;
    case GgufKind::i8: v.i = r.read<int8_t>(what); break;
    case GgufKind::u16: v.i = r.read<uint16_t>(what); break;
    case GgufKind::i16: v.i = r.read<int16_t>(what); break;
    case GgufKind::u32: v.i = r.read<uint32_t>(what); break;
    case GgufKind::i32: v.i = r.read<int32_t>(what); break;
    case GgufKind::i64: v.i = r.read<int64_t>(what); break;
    case GgufKind::u64: {
      const uint64_t u = r.read<uint64_t>(what);
      TITAN_CHECK(u <= static_cast<uint64_t>(INT64_MAX), "[gguf] ", path, ": ", what, " holds ", u,
                  ", beyond what a count or id can be. HINT: the file is damaged");
      v.i = static_cast<int64_t>(u);
      break;
    }
    case GgufKind::boolean: {
      const uint8_t b = r.read<uint8_t>(what);
      TITAN_CHECK(b <= 1, "[gguf] ", path, ": ", what, " is a bool holding ", int(b), ". HINT: the file is damaged");
      v.i = b;
      break;
    }
    case GgufKind::f32: v.f = r.read<float>(what); break;
    case GgufKind::f64: v.f = r.read<double>(what); break;
    case GgufKind::string: v.s = r.string(what); break;
    case GgufKind::array: {
      TITAN_CHECK(!in_array, "[gguf] ", path, ": ", what, " is an array of arrays, which no model key is. HINT: the "
                  "file is damaged or not a model");
      const uint32_t elem = r.read<uint32_t>(what + " (its element type)");
      TITAN_CHECK(elem <= static_cast<uint32_t>(GgufKind::f64) && elem != static_cast<uint32_t>(GgufKind::array),
                  "[gguf] ", path, ": ", what, " has element type ", elem, ". HINT: the file is damaged");
      v.elem = static_cast<GgufKind>(elem);
      const uint64_t n = r.read<uint64_t>(what + " (its length)");
      // Each element takes at least kind_size bytes: a count beyond the file is refused before
      // anything is allocated.
      TITAN_CHECK(n <= r.remaining() / kind_size(v.elem), "[gguf] ", path, ": ", what, " claims ", n,
                  " elements, more than the rest of the file holds. HINT: the file is truncated or damaged");
      v.items.reserve(n);
      for (uint64_t k = 0; k < n; ++k) v.items.push_back(read_value(r, v.elem, what, path, true));
      break;
    }
  }
  return v;
}

void write_value(std::ostream& out, const GgufValue& v, bool with_kind);

template <typename T>
void put(std::ostream& out, T v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof(T));
}

void put_string(std::ostream& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out.write(s.data(), static_cast<std::streamsize>(s.size()));
}

void write_value(std::ostream& out, const GgufValue& v, bool with_kind) {
  if (with_kind) put<uint32_t>(out, static_cast<uint32_t>(v.kind));
  switch (v.kind) {
    case GgufKind::u8: put<uint8_t>(out, static_cast<uint8_t>(v.i)); break;
    case GgufKind::i8: put<int8_t>(out, static_cast<int8_t>(v.i)); break;
    case GgufKind::u16: put<uint16_t>(out, static_cast<uint16_t>(v.i)); break;
    case GgufKind::i16: put<int16_t>(out, static_cast<int16_t>(v.i)); break;
    case GgufKind::u32: put<uint32_t>(out, static_cast<uint32_t>(v.i)); break;
    case GgufKind::i32: put<int32_t>(out, static_cast<int32_t>(v.i)); break;
    case GgufKind::u64: put<uint64_t>(out, static_cast<uint64_t>(v.i)); break;
    case GgufKind::i64: put<int64_t>(out, v.i); break;
    case GgufKind::boolean: put<uint8_t>(out, v.i != 0 ? 1 : 0); break;
    case GgufKind::f32: put<float>(out, static_cast<float>(v.f)); break;
    case GgufKind::f64: put<double>(out, v.f); break;
    case GgufKind::string: put_string(out, v.s); break;
    case GgufKind::array:
      put<uint32_t>(out, static_cast<uint32_t>(v.elem));
      put<uint64_t>(out, v.items.size());
      for (const GgufValue& item : v.items) write_value(out, item, false);
      break;
  }
}

uint64_t align_up(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

}  // namespace

const char* gguf_kind_name(GgufKind kind) {
  static const char* const kNames[] = {"UINT8", "INT8",  "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
                                       "BOOL",  "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"};
  const auto i = static_cast<uint32_t>(kind);
  return i < 13 ? kNames[i] : "?";
}

bool GgufValue::is_integer() const {
  return kind != GgufKind::f32 && kind != GgufKind::f64 && kind != GgufKind::string && kind != GgufKind::array;
}
GgufValue GgufValue::integer(GgufKind kind, int64_t v) {
  GgufValue out;
  out.kind = kind;
  out.i = v;
  return out;
}
GgufValue GgufValue::of_f32(float v) {
  GgufValue out;
  out.kind = GgufKind::f32;
  out.f = v;
  return out;
}
GgufValue GgufValue::of_string(std::string v) {
  GgufValue out;
  out.kind = GgufKind::string;
  out.s = std::move(v);
  return out;
}
GgufValue GgufValue::array_of(GgufKind elem, std::vector<GgufValue> items) {
  GgufValue out;
  out.kind = GgufKind::array;
  out.elem = elem;
  out.items = std::move(items);
  return out;
}

int64_t GgufTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

struct GgufFile::Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr != nullptr) ::munmap(addr, size);
  }
};

GgufFile GgufFile::open(const std::string& path) {
  std::string problem;
  const int fd = open_regular_file(path, &problem);
  TITAN_CHECK(fd >= 0, "[gguf] cannot open ", path, ": ", problem);
  struct stat st {};
  TITAN_CHECK(::fstat(fd, &st) == 0, "[gguf] cannot open ", path, ": ", std::strerror(errno));
  const auto size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    return parse({}, path);  // names the empty file
  }
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);
  TITAN_CHECK(addr != MAP_FAILED, "[gguf] cannot map ", path, " (", size, " bytes): ", std::strerror(map_errno));
  auto mapping = std::make_shared<Mapping>();
  mapping->addr = addr;
  mapping->size = size;
  GgufFile f = parse(std::string_view(static_cast<const char*>(addr), size), path);
  f.mapping_ = std::move(mapping);
  return f;
}

GgufFile GgufFile::parse(std::string_view bytes, const std::string& path) {
  GgufFile f;
  f.path_ = path;
  Reader r(bytes, path);
  TITAN_CHECK(bytes.size() >= 4 && r.read<uint32_t>("the magic") == kMagic, "[gguf] ", path,
              " does not start with the GGUF magic. HINT: pass a .gguf file (llama.cpp, Ollama) or a model folder");
  f.version_ = r.read<uint32_t>("the version");
  TITAN_CHECK(f.version_ == 2 || f.version_ == 3, "[gguf] ", path, ": GGUF version ", f.version_,
              " is not read (versions 2 and 3 are). HINT: convert it with a current llama.cpp");
  const uint64_t n_tensors = r.read<uint64_t>("the tensor count");
  const uint64_t n_kv = r.read<uint64_t>("the metadata count");
  TITAN_CHECK(n_kv <= r.remaining() / 12 && n_tensors <= r.remaining() / 24, "[gguf] ", path, ": the header claims ",
              n_kv, " keys and ", n_tensors, " tensors, more than the file holds. HINT: the file is truncated or damaged; download it again");
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = r.string("metadata key " + std::to_string(k));
    const uint32_t kind = r.read<uint32_t>("the type of '" + key + "'");
    TITAN_CHECK(kind <= static_cast<uint32_t>(GgufKind::f64), "[gguf] ", path, ": key '", key, "' has type ", kind,
                ", which GGUF does not define. HINT: the file is damaged");
    GgufValue v = read_value(r, static_cast<GgufKind>(kind), "key '" + key + "'", path, false);
    TITAN_CHECK(f.kv_index_.emplace(key, f.kv_.size()).second, "[gguf] ", path, ": key '", key,
                "' appears twice. HINT: the file is damaged");
    f.kv_.emplace_back(std::move(key), std::move(v));
  }
  if (const GgufValue* a = f.find("general.alignment")) {
    TITAN_CHECK(a->kind == GgufKind::u32 && a->i > 0 && (a->i & (a->i - 1)) == 0, "[gguf] ", path,
                ": general.alignment must be a UINT32 power of two, got ", a->i, ". HINT: the file is damaged");
    f.alignment_ = static_cast<uint64_t>(a->i);
  }
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensorInfo t;
    t.name = r.string("tensor info " + std::to_string(k));
    const std::string what = "tensor '" + t.name + "'";
    const uint32_t n_dims = r.read<uint32_t>(what + " (its dimension count)");
    TITAN_CHECK(n_dims >= 1 && n_dims <= kMaxDims, "[gguf] ", path, ": ", what, " has ", n_dims,
                " dimensions (1 to 4 allowed). HINT: the file is damaged");
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne = r.read<uint64_t>(what + " (its dimensions)");
      TITAN_CHECK(ne >= 1 && ne <= (uint64_t{1} << 40) && numel <= (uint64_t{1} << 42) / ne, "[gguf] ", path, ": ",
                  what, " has dimension ", ne, ". HINT: the file is damaged");
      numel *= ne;
      t.ne.push_back(static_cast<int64_t>(ne));
    }
    const uint32_t type = r.read<uint32_t>(what + " (its type)");
    const GgmlTypeInfo* info = ggml_type_info(type);
    TITAN_CHECK(info != nullptr, "[gguf] ", path, ": ", what, " has ggml type ", type, ", which titan does not "
                "know. HINT: re-quantize it to one of f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, q6_K");
    t.type = info->type;
    TITAN_CHECK(t.ne[0] % info->block == 0, "[gguf] ", path, ": ", what, " is ", info->name, " with rows of ", t.ne[0],
                " elements, not whole blocks of ", info->block, ". HINT: the file is damaged");
    t.bytes = static_cast<uint64_t>(numel / static_cast<uint64_t>(info->block)) * static_cast<uint64_t>(info->bytes);
    t.offset = r.read<uint64_t>(what + " (its offset)");
    TITAN_CHECK(t.offset % f.alignment_ == 0, "[gguf] ", path, ": ", what, " starts at ", t.offset,
                ", not a multiple of the alignment ", f.alignment_, ". HINT: the file is damaged");
    TITAN_CHECK(f.tensor_index_.emplace(t.name, f.tensors_.size()).second, "[gguf] ", path, ": ", what,
                " appears twice. HINT: the file is damaged");
    f.tensors_.push_back(std::move(t));
  }
  const uint64_t data_start = align_up(r.pos(), f.alignment_);
  for (const GgufTensorInfo& t : f.tensors_) {
    TITAN_CHECK(data_start <= bytes.size() && t.offset <= bytes.size() - data_start &&
                    t.bytes <= bytes.size() - data_start - t.offset,
                "[gguf] ", path, ": tensor '", t.name, "' (", t.bytes, " bytes at data offset ", t.offset,
                ") runs past the end of the file (", bytes.size(), " bytes). HINT: the file is truncated; download "
                "it again");
  }
  f.data_ = reinterpret_cast<const uint8_t*>(bytes.data()) + std::min<uint64_t>(data_start, bytes.size());
  return f;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  const auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

void GgufFile::release(const GgufTensorInfo& t) const {
  if (mapping_ == nullptr || t.bytes == 0) return;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data(t)) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(data(t) + t.bytes);
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

const GgufValue& GgufFile::get(const std::string& key) const {
  const GgufValue* v = find(key);
  TITAN_CHECK(v != nullptr, "[gguf] ", path_, ": no metadata key '", key, "'. HINT: the file was not written for "
              "this architecture, or by a converter too old; convert the model again with a current llama.cpp");
  return *v;
}

std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue& v = get(key);
  TITAN_CHECK(v.kind == GgufKind::string, "[gguf] ", path_, ": key '", key, "' is ", gguf_kind_name(v.kind),
              ", expected STRING. HINT: the file is damaged");
  return v.s;
}

int64_t GgufFile::get_int(const std::string& key) const {
  const GgufValue& v = get(key);
  TITAN_CHECK(v.is_integer() && v.kind != GgufKind::boolean, "[gguf] ", path_, ": key '", key, "' is ",
              gguf_kind_name(v.kind), ", expected an integer. HINT: the file is damaged");
  return v.i;
}

double GgufFile::get_float(const std::string& key) const {
  const GgufValue& v = get(key);
  if (v.is_float()) return v.f;
  TITAN_CHECK(v.is_integer() && v.kind != GgufKind::boolean, "[gguf] ", path_, ": key '", key, "' is ",
              gguf_kind_name(v.kind), ", expected a number. HINT: the file is damaged");
  return static_cast<double>(v.i);
}

void GgufWriter::add(const std::string& key, GgufValue value) {
  for (auto& [k, v] : kv_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

void GgufWriter::add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                            std::function<void(std::string& bytes)> produce) {
  const GgmlTypeInfo& info = ggml_type_info(type);
  TITAN_CHECK(!ne.empty() && ne.size() <= kMaxDims && ne[0] % info.block == 0, "[gguf] tensor '", name,
              "': rows of ", ne.empty() ? 0 : ne[0], " elements cannot be stored as ", info.name, " (blocks of ",
              info.block, ")");
  tensors_.push_back({name, type, std::move(ne), std::move(produce)});
}

void GgufWriter::write(const std::string& path) const {
  constexpr uint64_t kAlign = 32;
  std::vector<uint64_t> sizes, offsets;
  uint64_t offset = 0;
  for (const Pending& t : tensors_) {
    int64_t numel = 1;
    for (int64_t d : t.ne) numel *= d;
    const GgmlTypeInfo& info = ggml_type_info(t.type);
    sizes.push_back(static_cast<uint64_t>(numel / info.block) * static_cast<uint64_t>(info.bytes));
    offsets.push_back(offset);
    offset = align_up(offset + sizes.back(), kAlign);
  }
  std::ostringstream header;  // the file's streambuf has no position: the header is sized here
  put<uint32_t>(header, kMagic);
  put<uint32_t>(header, 3);
  put<uint64_t>(header, tensors_.size());
  put<uint64_t>(header, kv_.size());
  for (const auto& [key, value] : kv_) {
    put_string(header, key);
    write_value(header, value, true);
  }
  for (size_t i = 0; i < tensors_.size(); ++i) {
    put_string(header, tensors_[i].name);
    put<uint32_t>(header, static_cast<uint32_t>(tensors_[i].ne.size()));
    for (int64_t d : tensors_[i].ne) put<uint64_t>(header, static_cast<uint64_t>(d));
    put<uint32_t>(header, static_cast<uint32_t>(tensors_[i].type));
    put<uint64_t>(header, offsets[i]);
  }
  const std::string head = header.str();
  write_file_atomic(path, [&](std::ostream& out) {
    const uint64_t written = head.size();
    out.write(head.data(), static_cast<std::streamsize>(head.size()));
    const std::string zeros(kAlign, '\0');
    out.write(zeros.data(), static_cast<std::streamsize>(align_up(written, kAlign) - written));
    std::string bytes;
    for (size_t i = 0; i < tensors_.size(); ++i) {
      bytes.clear();
      tensors_[i].produce(bytes);
      TITAN_CHECK(bytes.size() == sizes[i], "[gguf] tensor '", tensors_[i].name, "' produced ", bytes.size(),
                  " bytes, expected ", sizes[i]);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      const uint64_t pad = align_up(sizes[i], kAlign) - sizes[i];
      out.write(zeros.data(), static_cast<std::streamsize>(pad));  // after the last too, as gguf-py does
    }
  });
}

bool is_gguf_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0;
}

}  // namespace titan::ckpt
