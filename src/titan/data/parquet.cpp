// The Parquet reader: the footer (Thrift compact protocol), the schema as a tree of JSON shapes,
// one row group's selected column chunks decoded into levels and values, and the rows assembled
// from them (Dremel record assembly). Names follow parquet-format's parquet.thrift.
#include "titan/data/parquet.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "titan/core/error.h"
#include "titan/core/path_check.h"
#include "titan/core/utf8.h"
#include "titan/data/parquet_codec.h"

namespace titan::data {

using nlohmann::ordered_json;
using parquet::ParquetError;
using parquet::Span;

namespace {

[[noreturn]] void fail(const std::string& what) { throw ParquetError(what); }

// ---- Thrift compact protocol (the footer and page headers) -------------------------------------

enum TType : int { kStop = 0, kTrue = 1, kFalse = 2, kByte = 3, kI16 = 4, kI32 = 5, kI64 = 6, kDouble = 7,
                   kBinary = 8, kList = 9, kSet = 10, kMap = 11, kStruct = 12 };
constexpr int kMaxThriftDepth = 32;

struct Thrift {
  Span in;
  const char* what;  // "the footer", "a page header"

  int64_t zigzag() {
    const uint64_t v = in.varint(what);
    return static_cast<int64_t>((v >> 1) ^ (~(v & 1) + 1));
  }
  int32_t i32() {
    const int64_t v = zigzag();
    if (v < INT32_MIN || v > INT32_MAX) fail(str(what, ": an i32 field holds ", v));
    return static_cast<int32_t>(v);
  }
  std::string binary() {
    const uint64_t len = in.varint(what);
    in.need(len, what);
    std::string s(reinterpret_cast<const char*>(in.p + in.pos), static_cast<size_t>(len));
    in.pos += static_cast<size_t>(len);
    return s;
  }
  // A list header: the element count (bounded by the bytes left: every element takes one) and type.
  std::pair<size_t, int> list_header() {
    const uint8_t b = in.byte(what);
    uint64_t size = b >> 4;
    if (size == 15) size = in.varint(what);
    if (size > in.left()) fail(str(what, ": a list of ", size, " elements in ", in.left(), " bytes"));
    return {static_cast<size_t>(size), b & 0x0F};
  }
  void skip(int type, int depth) {
    if (depth > kMaxThriftDepth) fail(str(what, ": nested deeper than ", kMaxThriftDepth, " levels"));
    switch (type) {
      case kTrue: case kFalse: return;  // a struct field's value is in its type nibble
      case kByte: in.byte(what); return;
      case kI16: case kI32: case kI64: in.varint(what); return;
      case kDouble: in.need(8, what); in.pos += 8; return;
      case kBinary: binary(); return;
      case kList: case kSet: {
        const auto [n, et] = list_header();
        for (size_t i = 0; i < n; ++i) et == kTrue || et == kFalse ? (void)in.byte(what) : skip(et, depth + 1);
        return;
      }
      case kMap: {
        const uint64_t n = in.varint(what);
        if (n == 0) return;
        if (n > in.left()) fail(str(what, ": a map of ", n, " entries in ", in.left(), " bytes"));
        const uint8_t kv = in.byte(what);
        for (uint64_t i = 0; i < n; ++i) {
          skip(kv >> 4, depth + 1);
          skip(kv & 0x0F, depth + 1);
        }
        return;
      }
      case kStruct: read_struct([](int, int) { return false; }, depth + 1); return;
      default: fail(str(what, ": unknown Thrift type ", type));
    }
  }
  // Calls field(id, type) for each field; it reads the value and returns true, or returns false to
  // have it skipped.
  template <class F>
  void read_struct(F&& field, int depth = 0) {
    if (depth > kMaxThriftDepth) fail(str(what, ": nested deeper than ", kMaxThriftDepth, " levels"));
    int16_t last = 0;
    for (;;) {
      const uint8_t b = in.byte(what);
      if (b == kStop) return;
      const int type = b & 0x0F, delta = b >> 4;
      const int64_t id = delta ? last + delta : zigzag();
      if (id < INT16_MIN || id > INT16_MAX) fail(str(what, ": field id ", id));
      last = static_cast<int16_t>(id);
      if (!field(static_cast<int>(id), type)) skip(type, depth + 1);
    }
  }
  template <class F>
  void read_list(F&& element) {
    const auto [n, et] = list_header();
    for (size_t i = 0; i < n; ++i) element(et);
  }
};

// ---- The footer ---------------------------------------------------------------------------------

enum Repetition : int { kRequired = 0, kOptional = 1, kRepeated = 2 };
enum PhysicalType : int { kBoolean = 0, kInt32 = 1, kInt64 = 2, kInt96 = 3, kFloat = 4, kDoubleT = 5,
                          kByteArray = 6, kFixedLenByteArray = 7 };
enum ConvertedType : int { kMapConverted = 1, kMapKeyValue = 2, kListConverted = 3 };

const char* type_name(int t) {
  static const char* names[] = {"BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE", "BYTE_ARRAY",
                                "FIXED_LEN_BYTE_ARRAY"};
  return t >= 0 && t <= 7 ? names[t] : "an unknown type";
}

struct SchemaElement {
  int type = -1;  // a leaf's PhysicalType; -1 for a group
  int32_t type_length = 0;
  int repetition = kRequired;
  std::string name;
  int32_t num_children = 0;
  int converted = -1;
  bool is_list = false, is_map = false;  // LIST / MAP, as a logical or converted type
};

struct ColumnChunk {
  int type = -1;
  std::vector<std::string> path;
  int codec = 0;
  int64_t num_values = 0;
  int64_t uncompressed = 0, compressed = 0;
  int64_t data_page_offset = -1, dictionary_page_offset = -1;
  bool external = false;  // file_path set: the chunk lives in another file
};

struct RowGroup {
  std::vector<ColumnChunk> columns;
  int64_t num_rows = 0;
};

struct FileMeta {
  std::vector<SchemaElement> schema;
  int64_t num_rows = 0;
  std::vector<RowGroup> row_groups;
};

SchemaElement read_schema_element(Thrift& t) {
  SchemaElement e;
  t.read_struct([&](int id, int type) {
    switch (id) {
      case 1: if (type != kI32) return false; e.type = t.i32(); return true;
      case 2: if (type != kI32) return false; e.type_length = t.i32(); return true;
      case 3: if (type != kI32) return false; e.repetition = t.i32(); return true;
      case 4: if (type != kBinary) return false; e.name = t.binary(); return true;
      case 5: if (type != kI32) return false; e.num_children = t.i32(); return true;
      case 6:
        if (type != kI32) return false;
        e.converted = t.i32();
        e.is_list = e.is_list || e.converted == kListConverted;
        e.is_map = e.is_map || e.converted == kMapConverted || e.converted == kMapKeyValue;
        return true;
      case 10:  // LogicalType, a union: field 2 MAP, 3 LIST
        if (type != kStruct) return false;
        t.read_struct([&](int kind, int) {
          e.is_map = e.is_map || kind == 2;
          e.is_list = e.is_list || kind == 3;
          return false;
        }, 1);
        return true;
      default: return false;
    }
  });
  if (e.repetition < kRequired || e.repetition > kRepeated) fail(str("schema field '", e.name, "' has repetition ", e.repetition));
  return e;
}

ColumnChunk read_column_chunk(Thrift& t) {
  ColumnChunk c;
  bool has_meta = false;
  t.read_struct([&](int id, int type) {
    if (id == 1 && type == kBinary) {
      c.external = !t.binary().empty();
      return true;
    }
    if (id != 3 || type != kStruct) return false;
    has_meta = true;
    t.read_struct([&](int mid, int mtype) {
      switch (mid) {
        case 1: if (mtype != kI32) return false; c.type = t.i32(); return true;
        case 3:
          if (mtype != kList) return false;
          t.read_list([&](int et) {
            if (et != kBinary) fail("the footer: a column path holds a non-string");
            c.path.push_back(t.binary());
          });
          return true;
        case 4: if (mtype != kI32) return false; c.codec = t.i32(); return true;
        case 5: if (mtype != kI64) return false; c.num_values = t.zigzag(); return true;
        case 6: if (mtype != kI64) return false; c.uncompressed = t.zigzag(); return true;
        case 7: if (mtype != kI64) return false; c.compressed = t.zigzag(); return true;
        case 9: if (mtype != kI64) return false; c.data_page_offset = t.zigzag(); return true;
        case 11: if (mtype != kI64) return false; c.dictionary_page_offset = t.zigzag(); return true;
        default: return false;
      }
    }, 1);
    return true;
  });
  if (!has_meta) fail("the footer: a column chunk without its metadata");
  return c;
}

FileMeta read_footer(const uint8_t* p, size_t n) {
  Thrift t{Span{p, n, 0}, "the footer"};
  FileMeta m;
  bool has_schema = false, has_rows = false;
  t.read_struct([&](int id, int type) {
    switch (id) {
      case 2:
        if (type != kList) return false;
        t.read_list([&](int et) {
          if (et != kStruct) fail("the footer: a schema element is not a struct");
          m.schema.push_back(read_schema_element(t));
        });
        has_schema = true;
        return true;
      case 3: if (type != kI64) return false; m.num_rows = t.zigzag(); has_rows = true; return true;
      case 4:
        if (type != kList) return false;
        t.read_list([&](int et) {
          if (et != kStruct) fail("the footer: a row group is not a struct");
          RowGroup g;
          t.read_struct([&](int gid, int gtype) {
            if (gid == 1 && gtype == kList) {
              t.read_list([&](int ct) {
                if (ct != kStruct) fail("the footer: a column chunk is not a struct");
                g.columns.push_back(read_column_chunk(t));
              });
              return true;
            }
            if (gid == 3 && gtype == kI64) {
              g.num_rows = t.zigzag();
              return true;
            }
            return false;
          });
          m.row_groups.push_back(std::move(g));
        });
        return true;
      default: return false;
    }
  });
  if (!has_schema || m.schema.empty()) fail("the footer has no schema");
  if (!has_rows || m.num_rows < 0) fail("the footer has no row count");
  return m;
}

// ---- The schema as JSON shapes -------------------------------------------------------------------

// How one schema node becomes JSON. def_present: the value is null below this definition level;
// a list's elements exist from def_nonempty on, and `rep` is their repetition level.
struct Shape {
  enum Kind { leaf, object, list, unreadable } kind = leaf;
  std::string name;  // the key in the parent object ("" for a list element)
  int def_present = 0, def_nonempty = 0, rep = 0;
  int column = -1;   // leaf: index among the file's leaf columns
  std::string why;   // unreadable: the reason
  std::vector<Shape> children;  // object: fields; list: the element
};

struct Leaf {
  int type = -1;
  int max_def = 0, max_rep = 0;
  std::string dotted;              // its path, for messages
  std::vector<const Shape*> path;  // top-level field .. leaf
};

constexpr int kMaxSchemaDepth = 32;

class SchemaBuilder {
 public:
  explicit SchemaBuilder(const std::vector<SchemaElement>& s) : s_(s) {}

  std::vector<Shape> build_root() {
    const SchemaElement& root = s_[0];
    if (root.num_children < 0) fail("the footer: the schema root has a negative child count");
    std::vector<Shape> fields;
    next_ = 1;
    for (int i = 0; i < root.num_children; ++i) fields.push_back(build(0, 0, 0));
    if (next_ != s_.size()) fail(str("the footer: the schema holds ", s_.size() - next_, " elements outside its tree"));
    return fields;
  }
  int num_leaves() const { return leaves_; }
  std::vector<int> leaf_types, leaf_def, leaf_rep;
  std::vector<std::string> leaf_dotted;

 private:
  const SchemaElement& take(int depth) {
    if (next_ >= s_.size()) fail("the footer: the schema's child counts run past its elements");
    if (depth > kMaxSchemaDepth) fail(str("the footer: the schema nests deeper than ", kMaxSchemaDepth, " levels"));
    return s_[next_++];
  }
  Shape build(int depth, int d0, int r0, std::string prefix = "") {
    const SchemaElement& e = take(depth);
    const std::string dotted = prefix.empty() ? e.name : prefix + "." + e.name;
    const int d = d0 + (e.repetition != kRequired), r = r0 + (e.repetition == kRepeated);
    if (e.repetition == kRepeated) {  // a bare repeated field: a list of its values
      Shape list;
      list.kind = Shape::list;
      list.name = e.name;
      list.def_present = d0;
      list.def_nonempty = d;
      list.rep = r;
      list.children.push_back(value(e, depth, d, r, dotted));
      return list;
    }
    Shape v = value(e, depth, d, r, dotted);
    v.name = e.name;
    return v;
  }
  // e's value, its own levels (d, r) already counted.
  Shape value(const SchemaElement& e, int depth, int d, int r, const std::string& dotted) {
    Shape v;
    v.def_present = d;
    if (e.num_children < 0) fail(str("the footer: schema field '", dotted, "' has a negative child count"));
    if (e.type >= 0 && e.num_children == 0) {
      v.kind = Shape::leaf;
      v.column = leaves_++;
      leaf_types.push_back(e.type);
      leaf_def.push_back(d);
      leaf_rep.push_back(r);
      leaf_dotted.push_back(dotted);
      return v;
    }
    if (e.is_map) {  // read through (its leaves keep their column numbers), refused when selected
      v.kind = Shape::unreadable;
      v.why = "is a map column, which titan does not read";
      for (int i = 0; i < e.num_children; ++i) build(depth + 1, d, r, dotted);
      return v;
    }
    if (e.is_list && e.num_children == 1 && s_[next_].repetition == kRepeated) {
      const SchemaElement& mid = take(depth + 1);
      const int dc = d + 1, rc = r + 1;
      v.kind = Shape::list;
      v.def_nonempty = dc;
      v.rep = rc;
      const std::string mid_dotted = dotted + "." + mid.name;
      // Three levels (list > repeated group > element) unless the repeated field is the element
      // itself: a leaf, a group of several fields, or named "array" / "<list>_tuple" (the
      // format's backward-compatibility rules).
      const bool two_level = mid.num_children != 1 || mid.type >= 0 || mid.name == "array" ||
                             mid.name == e.name + "_tuple";
      if (two_level) {
        v.children.push_back(value(mid, depth + 1, dc, rc, mid_dotted));
      } else {
        Shape element = build(depth + 2, dc, rc, mid_dotted);
        element.name.clear();
        v.children.push_back(std::move(element));
      }
      return v;
    }
    v.kind = Shape::object;
    for (int i = 0; i < e.num_children; ++i) v.children.push_back(build(depth + 1, d, r, dotted));
    return v;
  }

  const std::vector<SchemaElement>& s_;
  size_t next_ = 1;
  int leaves_ = 0;
};

// ---- One column chunk, decoded --------------------------------------------------------------------

struct ColumnValues {
  int type = -1;
  std::vector<uint8_t> rep, def;  // one per slot
  std::vector<int64_t> ints;      // BOOLEAN, INT32, INT64
  std::vector<double> reals;      // FLOAT, DOUBLE
  std::string bytes;              // BYTE_ARRAY: value i is bytes[ends[i-1], ends[i])
  std::vector<uint64_t> ends;
  std::vector<size_t> row_slot;   // the first slot of each row, and the number of slots at the end
  std::vector<size_t> row_value;  // the first value of each row

  size_t num_values() const {
    return type == kByteArray ? ends.size() : type == kFloat || type == kDoubleT ? reals.size() : ints.size();
  }
  void append_from(const ColumnValues& dict, const std::vector<uint32_t>& idx) {
    const size_t n = dict.num_values();
    for (const uint32_t i : idx) {
      if (i >= n) fail(str("a dictionary index ", i, " past the dictionary's ", n, " values"));
      if (type == kByteArray) {
        const uint64_t b = i ? dict.ends[i - 1] : 0;
        bytes.append(dict.bytes, b, dict.ends[i] - b);
        ends.push_back(bytes.size());
      } else if (type == kFloat || type == kDoubleT) {
        reals.push_back(dict.reals[i]);
      } else {
        ints.push_back(dict.ints[i]);
      }
    }
  }
};

enum PageType : int { kDataPage = 0, kIndexPage = 1, kDictionaryPage = 2, kDataPageV2 = 3 };
enum Encoding : int { kPlain = 0, kPlainDictionary = 2, kRle = 3, kBitPacked = 4, kDeltaBinaryPacked = 5,
                      kDeltaLengthByteArray = 6, kDeltaByteArray = 7, kRleDictionary = 8, kByteStreamSplit = 9 };

std::string encoding_name(int e) {
  static const char* names[] = {"PLAIN", "GROUP_VAR_INT", "PLAIN_DICTIONARY", "RLE", "BIT_PACKED",
                                "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY",
                                "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"};
  return e >= 0 && e <= 9 ? names[e] : str("encoding ", e);
}

struct PageHeader {
  int type = -1;
  int32_t uncompressed = -1, compressed = -1;
  int32_t num_values = -1, encoding = -1, def_encoding = kRle, rep_encoding = kRle;  // v1 and dictionary
  int32_t num_nulls = 0, def_bytes = 0, rep_bytes = 0;                              // v2
  bool v2_compressed = true;
};

PageHeader read_page_header(Span& in) {
  Thrift t{in, "a page header"};
  PageHeader h;
  t.read_struct([&](int id, int type) {
    switch (id) {
      case 1: if (type != kI32) return false; h.type = t.i32(); return true;
      case 2: if (type != kI32) return false; h.uncompressed = t.i32(); return true;
      case 3: if (type != kI32) return false; h.compressed = t.i32(); return true;
      case 5: case 7: case 8:  // data page v1, dictionary page, data page v2 headers
        if (type != kStruct) return false;
        t.read_struct([&](int f, int ft) {
          if (ft == kTrue || ft == kFalse) {
            if (id == 8 && f == 7) h.v2_compressed = ft == kTrue;
            return true;
          }
          if (ft != kI32) return false;
          const int32_t v = t.i32();
          if (f == 1) h.num_values = v;
          if (id == 5) {
            if (f == 2) h.encoding = v;
            if (f == 3) h.def_encoding = v;
            if (f == 4) h.rep_encoding = v;
          } else if (id == 7) {
            if (f == 2) h.encoding = v;
          } else {
            if (f == 2) h.num_nulls = v;
            if (f == 4) h.encoding = v;
            if (f == 5) h.def_bytes = v;
            if (f == 6) h.rep_bytes = v;
          }
          return true;
        }, 1);
        return true;
      default: return false;
    }
  });
  in.pos = t.in.pos;
  if (h.type < 0 || h.uncompressed < 0 || h.compressed < 0) fail("a page header without its type or sizes");
  return h;
}

// One fixed-width little-endian value (4 or 8 bytes at `bytes`): an integer, or a float of that width.
template <class I, class F>
void push_fixed(const uint8_t* bytes, bool integer, ColumnValues& out) {
  static_assert(sizeof(I) == sizeof(F));
  if (integer) {
    I v;
    std::memcpy(&v, bytes, sizeof(I));
    out.ints.push_back(v);
  } else {
    F v;
    std::memcpy(&v, bytes, sizeof(F));
    out.reals.push_back(v);
  }
}

// PLAIN values of `type` (Encodings.md): `count` of them from `in` into out.
void decode_plain(Span& in, int type, int32_t type_length, size_t count, ColumnValues& out) {
  switch (type) {
    case kBoolean: {
      in.need((count + 7) / 8, "PLAIN booleans");
      for (size_t i = 0; i < count; ++i) out.ints.push_back((in.p[in.pos + i / 8] >> (i % 8)) & 1);
      in.pos += (count + 7) / 8;
      return;
    }
    case kInt32: case kFloat: case kInt64: case kDoubleT: {
      const size_t w = type == kInt32 || type == kFloat ? 4 : 8;
      in.need(count * w, str("PLAIN ", type_name(type), " values").c_str());
      for (size_t i = 0; i < count; ++i) {
        const uint8_t* at = in.p + in.pos + w * i;
        w == 4 ? push_fixed<int32_t, float>(at, type == kInt32, out) : push_fixed<int64_t, double>(at, type == kInt64, out);
      }
      in.pos += count * w;
      return;
    }
    case kByteArray:
      for (size_t i = 0; i < count; ++i) {
        const uint32_t len = in.u32le("a PLAIN BYTE_ARRAY length");
        in.need(len, "a PLAIN BYTE_ARRAY value");
        out.bytes.append(reinterpret_cast<const char*>(in.p + in.pos), len);
        out.ends.push_back(out.bytes.size());
        in.pos += len;
      }
      return;
    default:
      fail(str("values of type ", type_name(type), " (length ", type_length, "), which titan does not read"));
  }
}

// The values of one data page: `count` non-null values encoded as `encoding`.
void decode_values(Span in, int encoding, int type, int32_t type_length, size_t count, const ColumnValues* dict,
                   ColumnValues& out) {
  switch (encoding) {
    case kPlain: decode_plain(in, type, type_length, count, out); return;
    case kPlainDictionary: case kRleDictionary: {
      if (!dict) fail(str(encoding_name(encoding), " values without a dictionary page"));
      if (count == 0) return;
      const int width = in.byte("the dictionary indices' bit width");
      std::vector<uint32_t> idx;
      parquet::decode_hybrid(in, width, count, idx);
      out.append_from(*dict, idx);
      return;
    }
    case kRle: {
      if (type != kBoolean) fail(str("RLE values of type ", type_name(type), " (RLE is for booleans)"));
      in.u32le("the RLE booleans' length");
      std::vector<uint32_t> bits;
      parquet::decode_hybrid(in, 1, count, bits);
      for (const uint32_t b : bits) out.ints.push_back(b);
      return;
    }
    case kDeltaBinaryPacked: {
      if (type != kInt32 && type != kInt64) fail(str("DELTA_BINARY_PACKED values of type ", type_name(type)));
      std::vector<int64_t> v;
      parquet::decode_delta_binary(in, count, v);
      for (const int64_t x : v) out.ints.push_back(type == kInt32 ? static_cast<int32_t>(x) : x);
      return;
    }
    case kDeltaLengthByteArray: case kDeltaByteArray: {
      if (type != kByteArray) fail(str(encoding_name(encoding), " values of type ", type_name(type)));
      std::vector<int64_t> prefix, lengths;
      if (encoding == kDeltaByteArray) parquet::decode_delta_binary(in, count, prefix);
      parquet::decode_delta_binary(in, count, lengths);
      std::string previous;
      for (size_t i = 0; i < count; ++i) {
        const int64_t len = lengths[i], pre = prefix.empty() ? 0 : prefix[i];
        if (len < 0 || pre < 0 || static_cast<uint64_t>(pre) > previous.size()) {
          fail(str(encoding_name(encoding), ": a value of length ", len, " with prefix ", pre));
        }
        in.need(static_cast<size_t>(len), "a byte-array value");
        std::string v = previous.substr(0, static_cast<size_t>(pre));
        v.append(reinterpret_cast<const char*>(in.p + in.pos), static_cast<size_t>(len));
        in.pos += static_cast<size_t>(len);
        out.bytes += v;
        out.ends.push_back(out.bytes.size());
        if (encoding == kDeltaByteArray) previous = std::move(v);
      }
      return;
    }
    case kByteStreamSplit: {
      const size_t w = type == kFloat || type == kInt32 ? 4 : type == kDoubleT || type == kInt64 ? 8 : 0;
      if (w == 0) fail(str("BYTE_STREAM_SPLIT values of type ", type_name(type)));
      in.need(count * w, "BYTE_STREAM_SPLIT values");
      for (size_t i = 0; i < count; ++i) {
        uint8_t b[8];
        for (size_t k = 0; k < w; ++k) b[k] = in.p[in.pos + k * count + i];
        w == 4 ? push_fixed<int32_t, float>(b, type == kInt32, out) : push_fixed<int64_t, double>(b, type == kInt64, out);
      }
      return;
    }
    default: fail(str("values encoded as ", encoding_name(encoding), ", which titan does not read"));
  }
}

void decode_levels(Span in, int max_level, size_t count, std::vector<uint8_t>& out, const char* which) {
  if (max_level == 0) {
    out.insert(out.end(), count, 0);
    return;
  }
  std::vector<uint32_t> v;
  parquet::decode_hybrid(in, parquet::bit_width(static_cast<uint64_t>(max_level)), count, v);
  for (const uint32_t x : v) {
    if (x > static_cast<uint32_t>(max_level)) fail(str("a ", which, " level ", x, " above the column's ", max_level));
    out.push_back(static_cast<uint8_t>(x));
  }
}

// Decodes the chunk's pages (its bytes in `chunk`) into levels and values.
ColumnValues decode_chunk(const std::vector<uint8_t>& chunk, const ColumnChunk& meta, int max_def, int max_rep,
                          int32_t type_length, size_t max_bytes) {
  ColumnValues col;
  col.type = meta.type;
  std::unique_ptr<ColumnValues> dict;
  Span in{chunk.data(), chunk.size(), 0};
  size_t slots = 0;
  size_t decoded = 0;
  while (slots < static_cast<size_t>(meta.num_values)) {
    if (in.left() == 0) fail(str("the column chunk ends after ", slots, " of its ", meta.num_values, " values"));
    const PageHeader h = read_page_header(in);
    in.need(static_cast<size_t>(h.compressed), "a page");
    const uint8_t* body = in.p + in.pos;
    in.pos += static_cast<size_t>(h.compressed);
    decoded += static_cast<size_t>(h.uncompressed);
    if (decoded > max_bytes) {
      fail(str("the column chunk decompresses to more than the ", max_bytes, " bytes its metadata allows"));
    }
    if (h.type == kIndexPage) continue;
    if (h.type == kDictionaryPage) {
      if (dict) fail("a second dictionary page");
      if (slots) fail("a dictionary page after data pages");
      if (h.num_values < 0) fail("a dictionary page without its value count");
      if (h.encoding != kPlain && h.encoding != kPlainDictionary) {
        fail(str("a dictionary page encoded as ", encoding_name(h.encoding), " (expected PLAIN)"));
      }
      const std::vector<uint8_t> raw = parquet::decompress(meta.codec, body, static_cast<size_t>(h.compressed),
                                                          static_cast<size_t>(h.uncompressed));
      dict = std::make_unique<ColumnValues>();
      dict->type = meta.type;
      Span d{raw.data(), raw.size(), 0};
      decode_plain(d, meta.type, type_length, static_cast<size_t>(h.num_values), *dict);
      continue;
    }
    if (h.type != kDataPage && h.type != kDataPageV2) fail(str("a page of unknown type ", h.type));
    if (h.num_values < 0) fail("a data page without its value count");
    const size_t n = static_cast<size_t>(h.num_values);
    if (n > static_cast<size_t>(meta.num_values) - slots) {
      fail(str("its pages hold more values than the ", meta.num_values, " its metadata says"));
    }
    const size_t def_at = col.def.size();
    if (h.type == kDataPage) {
      const std::vector<uint8_t> raw = parquet::decompress(meta.codec, body, static_cast<size_t>(h.compressed),
                                                          static_cast<size_t>(h.uncompressed));
      Span p{raw.data(), raw.size(), 0};
      for (const auto& [max_level, enc, out, which] :
           {std::tuple{max_rep, h.rep_encoding, &col.rep, "repetition"},
            std::tuple{max_def, h.def_encoding, &col.def, "definition"}}) {
        if (max_level == 0) {
          out->insert(out->end(), n, 0);
          continue;
        }
        if (enc != kRle) fail(str(which, " levels encoded as ", encoding_name(enc), " (titan reads RLE levels)"));
        const uint32_t len = p.u32le("the levels' length");
        p.need(len, "the levels");
        decode_levels(Span{p.p + p.pos, len, 0}, max_level, n, *out, which);
        p.pos += len;
      }
      const size_t present = static_cast<size_t>(std::count(col.def.begin() + static_cast<std::ptrdiff_t>(def_at),
                                                            col.def.end(), static_cast<uint8_t>(max_def)));
      decode_values(Span{p.p + p.pos, p.left(), 0}, h.encoding, meta.type, type_length, present, dict.get(), col);
    } else {
      if (h.rep_bytes < 0 || h.def_bytes < 0 ||
          static_cast<size_t>(h.rep_bytes) + static_cast<size_t>(h.def_bytes) > static_cast<size_t>(h.compressed) ||
          h.rep_bytes + h.def_bytes > h.uncompressed) {
        fail("a data page v2 whose level sizes exceed the page");
      }
      decode_levels(Span{body, static_cast<size_t>(h.rep_bytes), 0}, max_rep, n, col.rep, "repetition");
      decode_levels(Span{body + h.rep_bytes, static_cast<size_t>(h.def_bytes), 0}, max_def, n, col.def, "definition");
      const size_t levels = static_cast<size_t>(h.rep_bytes) + static_cast<size_t>(h.def_bytes);
      const size_t packed = static_cast<size_t>(h.compressed) - levels;
      const size_t raw_size = static_cast<size_t>(h.uncompressed) - levels;
      const std::vector<uint8_t> raw = parquet::decompress(h.v2_compressed ? meta.codec : parquet::kUncompressed,
                                                          body + levels, packed, raw_size);
      const size_t present = static_cast<size_t>(std::count(col.def.begin() + static_cast<std::ptrdiff_t>(def_at),
                                                            col.def.end(), static_cast<uint8_t>(max_def)));
      decode_values(Span{raw.data(), raw.size(), 0}, h.encoding, meta.type, type_length, present, dict.get(), col);
    }
    slots += n;
  }
  // Row boundaries: a slot with repetition level 0 starts a row.
  size_t value = 0;
  for (size_t s = 0; s < col.def.size(); ++s) {
    if (col.rep[s] == 0) {
      col.row_slot.push_back(s);
      col.row_value.push_back(value);
    }
    value += col.def[s] == max_def;
  }
  if (value != col.num_values()) fail(str("the pages hold ", col.num_values(), " values for ", value, " defined slots"));
  if (!col.rep.empty() && col.rep[0] != 0) fail("the first value does not start a row (repetition level > 0)");
  col.row_slot.push_back(col.def.size());
  col.row_value.push_back(value);
  return col;
}

// ---- Byte sources -------------------------------------------------------------------------------

struct Bytes {
  virtual ~Bytes() = default;
  virtual uint64_t size() const = 0;
  virtual void read(uint64_t offset, size_t n, uint8_t* out) const = 0;  // within size(), checked by the caller
};

struct FileBytes : Bytes {
  int fd = -1;
  uint64_t n = 0;
  std::string path;
  explicit FileBytes(const std::string& p) : path(p) {
    std::string problem;
    fd = open_regular_file(p, &problem);
    TITAN_CHECK(fd >= 0, "[data] ", p, ": cannot be opened: ", problem);
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      TITAN_FAIL("[data] ", p, ": cannot be read (fstat failed)");
    }
    n = static_cast<uint64_t>(st.st_size);
  }
  ~FileBytes() override { ::close(fd); }
  uint64_t size() const override { return n; }
  void read(uint64_t offset, size_t len, uint8_t* out) const override {
    size_t done = 0;
    while (done < len) {
      const ssize_t got = ::pread(fd, out + done, len - done, static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      TITAN_CHECK(got > 0, "[data] ", path, ": read of ", len, " bytes at ", offset, " failed (",
                  got < 0 ? std::strerror(errno) : "end of file", "). HINT: the file changed while it was read");
      done += static_cast<size_t>(got);
    }
  }
};

struct MemoryBytes : Bytes {
  const std::string& s;
  explicit MemoryBytes(const std::string& b) : s(b) {}
  uint64_t size() const override { return s.size(); }
  void read(uint64_t offset, size_t len, uint8_t* out) const override {
    if (len) std::memcpy(out, s.data() + offset, len);
  }
};

}  // namespace

// ---- The reader ---------------------------------------------------------------------------------

struct ParquetReader::Impl {
  std::string path;
  std::unique_ptr<Bytes> bytes;
  size_t max_chunk_bytes = size_t{4} << 30;  // one column chunk, decompressed
  FileMeta meta;
  std::vector<Shape> fields;
  std::vector<int> leaf_types, leaf_def, leaf_rep;
  std::vector<std::string> leaf_dotted;
  std::vector<int32_t> leaf_type_length;
  std::vector<int64_t> group_start;  // the first row of each row group, and num_rows at the end

  std::vector<const Shape*> selected;                     // top-level fields
  std::vector<std::vector<std::vector<const Shape*>>> leaf_paths;  // per selected field, per leaf
  int group = -1;                                         // the decoded row group
  std::vector<ColumnValues> columns;                      // its columns (those selected), by leaf index
  int64_t next_row = 0;

  [[noreturn]] void damaged(const std::string& what, int g = -1, const std::string& column = "") const {
    std::string where = "[data] " + path + ": ";
    if (g >= 0) where += str("row group ", g, ", ");
    if (!column.empty()) where += "column " + column + ": ";
    TITAN_FAIL(where, what, ". HINT: the file is damaged or was written by a writer titan does not follow; rewrite it "
               "with pyarrow (pq.write_table), or convert it to JSONL");
  }

  void open() {
    const uint64_t n = bytes->size();
    uint8_t head[4] = {0, 0, 0, 0}, tail[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (n >= 12) {
      bytes->read(0, 4, head);
      bytes->read(n - 8, 8, tail);
    }
    if (n < 12 || std::memcmp(head, "PAR1", 4) != 0 || std::memcmp(tail + 4, "PAR1", 4) != 0) {
      TITAN_FAIL("[data] ", path, ": not a Parquet file (no PAR1 magic at its start and end",
                 n >= 12 && std::memcmp(tail + 4, "PARE", 4) == 0 ? "; PARE: encrypted, which titan does not read" : "",
                 "). HINT: the file is truncated or not Parquet; check the download, or use .jsonl/.txt");
    }
    uint32_t footer_len = 0;
    std::memcpy(&footer_len, tail, 4);
    if (footer_len == 0 || footer_len > n - 12) {
      damaged(str("the footer length ", footer_len, " does not fit the file's ", n, " bytes (truncated?)"));
    }
    std::vector<uint8_t> footer(footer_len);
    bytes->read(n - 8 - footer_len, footer_len, footer.data());
    try {
      meta = read_footer(footer.data(), footer.size());
      SchemaBuilder b(meta.schema);
      fields = b.build_root();
      leaf_types = b.leaf_types;
      leaf_def = b.leaf_def;
      leaf_rep = b.leaf_rep;
      leaf_dotted = b.leaf_dotted;
    } catch (const ParquetError& e) {
      damaged(e.what());
    }
    for (const int d : leaf_def) {
      if (d > 255) damaged("a column nests more than 255 optional levels");
    }
    for (const SchemaElement& e : meta.schema) {
      if (!valid_utf8(e.name)) damaged("a schema field name that is not UTF-8");
    }
    leaf_type_length.assign(leaf_types.size(), 0);
    int64_t rows = 0;
    const uint64_t data_end = n - 8 - footer_len;
    for (size_t g = 0; g < meta.row_groups.size(); ++g) {
      const RowGroup& rg = meta.row_groups[g];
      const int gi = static_cast<int>(g);
      if (rg.columns.size() != leaf_types.size()) {
        damaged(str("holds ", rg.columns.size(), " column chunks for the schema's ", leaf_types.size(), " columns"), gi);
      }
      if (rg.num_rows < 0 || rg.num_rows > INT64_MAX - rows) damaged(str("a row count of ", rg.num_rows), gi);
      group_start.push_back(rows);
      rows += rg.num_rows;
      for (size_t c = 0; c < rg.columns.size(); ++c) {
        const ColumnChunk& cc = rg.columns[c];
        const std::string& name = leaf_dotted[c];
        if (cc.type != leaf_types[c]) {
          damaged(str("type ", type_name(cc.type), " where the schema says ", type_name(leaf_types[c])), gi, name);
        }
        if (cc.external) damaged("stored in another file (ColumnChunk.file_path), which titan does not read", gi, name);
        const int64_t start = first_page(cc);
        if (start < 4 || cc.compressed < 0 || static_cast<uint64_t>(start) > data_end ||
            static_cast<uint64_t>(cc.compressed) > data_end - static_cast<uint64_t>(start)) {
          damaged(str("its pages (", cc.compressed, " bytes at offset ", start, ") lie outside the file's data"), gi, name);
        }
        if (cc.num_values < rg.num_rows && leaf_rep[c] == 0) {
          damaged(str(cc.num_values, " values for ", rg.num_rows, " rows"), gi, name);
        }
      }
    }
    if (rows != meta.num_rows) damaged(str("the row groups hold ", rows, " rows, the footer says ", meta.num_rows));
    group_start.push_back(rows);
  }

  static int64_t first_page(const ColumnChunk& cc) {
    return cc.dictionary_page_offset > 0 && cc.dictionary_page_offset < cc.data_page_offset ? cc.dictionary_page_offset
                                                                                            : cc.data_page_offset;
  }

  void load_group(int g) {
    columns.assign(leaf_types.size(), ColumnValues{});
    group = g;
    const RowGroup& rg = meta.row_groups[static_cast<size_t>(g)];
    for (const auto& per_field : leaf_paths) {
      for (const auto& lp : per_field) {
        const int c = lp.back()->column;
        const ColumnChunk& cc = rg.columns[static_cast<size_t>(c)];
        const std::string& name = leaf_dotted[static_cast<size_t>(c)];
        std::vector<uint8_t> chunk(static_cast<size_t>(cc.compressed));
        bytes->read(static_cast<uint64_t>(first_page(cc)), chunk.size(), chunk.data());
        try {
          columns[static_cast<size_t>(c)] = decode_chunk(chunk, cc, leaf_def[static_cast<size_t>(c)],
                                                         leaf_rep[static_cast<size_t>(c)],
                                                         leaf_type_length[static_cast<size_t>(c)], max_chunk_bytes);
        } catch (const ParquetError& e) {
          damaged(e.what(), g, name);
        }
        const size_t rows_here = columns[static_cast<size_t>(c)].row_slot.size() - 1;
        if (rows_here != static_cast<size_t>(rg.num_rows)) {
          damaged(str("its levels hold ", rows_here, " rows, the row group ", rg.num_rows), g, name);
        }
      }
    }
  }

  ordered_json value(const ColumnValues& col, size_t v, const std::string& column) const {
    switch (col.type) {
      case kBoolean: return col.ints[v] != 0;
      case kInt32: case kInt64: return col.ints[v];
      case kFloat: case kDoubleT: return col.reals[v];
      default: {
        const uint64_t b = v ? col.ends[v - 1] : 0;
        std::string s = col.bytes.substr(b, col.ends[v] - b);
        size_t bad = 0;
        if (!valid_utf8(s, &bad)) {
          damaged(str("row ", next_row, ": a value that is not UTF-8 text (bad byte ", bad + 1, "); titan reads text columns"),
                  group, column);
        }
        return s;
      }
    }
  }

  // Row `r` of the decoded group into out[field.name] (Dremel record assembly, one leaf at a time).
  void assemble(const std::vector<const Shape*>& path, size_t r, ordered_json& row) const {
    const Shape& leaf = *path.back();
    const ColumnValues& col = columns[static_cast<size_t>(leaf.column)];
    const int max_def = leaf_def[static_cast<size_t>(leaf.column)];
    std::vector<size_t> index(path.size(), 0);
    size_t v = col.row_value[r];
    for (size_t s = col.row_slot[r]; s < col.row_slot[r + 1]; ++s) {
      const int rep = col.rep[s], def = col.def[s];
      ordered_json* slot = &row[path[0]->name];
      for (size_t k = 0; k < path.size(); ++k) {
        const Shape& node = *path[k];
        if (def < node.def_present) break;  // null here (the slot already is)
        if (node.kind == Shape::leaf) {
          *slot = value(col, v, leaf_dotted[static_cast<size_t>(leaf.column)]);
          break;
        }
        if (node.kind == Shape::object) {
          if (!slot->is_object()) *slot = ordered_json::object();
          slot = &(*slot)[path[k + 1]->name];
          continue;
        }
        if (!slot->is_array()) *slot = ordered_json::array();
        if (def < node.def_nonempty) break;  // an empty list
        if (rep < node.rep) {
          index[k] = 0;
        } else if (rep == node.rep) {
          ++index[k];
        }
        if (index[k] > slot->size()) {
          damaged(str("row ", next_row, ": repetition levels skip a list element"), group,
                  leaf_dotted[static_cast<size_t>(leaf.column)]);
        }
        if (index[k] == slot->size()) slot->push_back(nullptr);
        slot = &(*slot)[index[k]];
      }
      v += def == max_def;
    }
  }
};

ParquetReader::ParquetReader(std::string path) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  impl_->bytes = std::make_unique<FileBytes>(path);
  impl_->open();
}

ParquetReader::~ParquetReader() = default;
ParquetReader::ParquetReader(ParquetReader&&) noexcept = default;
ParquetReader& ParquetReader::operator=(ParquetReader&&) noexcept = default;

std::vector<std::string> ParquetReader::fields() const {
  std::vector<std::string> names;
  for (const Shape& f : impl_->fields) names.push_back(f.name);
  return names;
}

int64_t ParquetReader::num_rows() const { return impl_->meta.num_rows; }
int ParquetReader::num_row_groups() const { return static_cast<int>(impl_->meta.row_groups.size()); }
const std::string& ParquetReader::path() const { return impl_->path; }
int64_t ParquetReader::row() const { return impl_->next_row; }

int ParquetReader::row_group() const {
  const auto& s = impl_->group_start;
  // The last group whose first row is <= next_row and that holds rows (empty groups are passed over).
  const auto it = std::upper_bound(s.begin(), s.end() - 1, impl_->next_row);
  return static_cast<int>(it - s.begin()) - 1;
}

void ParquetReader::select(const std::vector<std::string>& names) {
  Impl& m = *impl_;
  m.selected.clear();
  m.leaf_paths.clear();
  for (const std::string& name : names) {
    const auto it = std::find_if(m.fields.begin(), m.fields.end(), [&](const Shape& f) { return f.name == name; });
    if (it == m.fields.end()) {
      std::string have;
      for (const Shape& f : m.fields) have += (have.empty() ? "" : ", ") + f.name;
      TITAN_FAIL("[data] ", m.path, ": no column \"", name, "\" (its columns: ", have, ")");
    }
    m.selected.push_back(&*it);
    std::vector<std::vector<const Shape*>> paths;
    std::vector<const Shape*> stack;
    std::function<void(const Shape&)> walk = [&](const Shape& s) {
      stack.push_back(&s);
      if (s.kind == Shape::unreadable) TITAN_FAIL("[data] ", m.path, ": column \"", name, "\" ", s.why);
      if (s.kind == Shape::leaf) {
        const int t = m.leaf_types[static_cast<size_t>(s.column)];
        TITAN_CHECK(t != kInt96 && t != kFixedLenByteArray, "[data] ", m.path, ": column ",
                    m.leaf_dotted[static_cast<size_t>(s.column)], " holds ", type_name(t),
                    " values, which titan does not read. HINT: select columns of text, integers or lists of them");
        paths.push_back(stack);
      }
      for (const Shape& c : s.children) walk(c);
      stack.pop_back();
    };
    walk(*it);
    m.leaf_paths.push_back(std::move(paths));
  }
  m.group = -1;
  m.next_row = 0;
}

void ParquetReader::seek(int64_t row) {
  TITAN_CHECK(row >= 0 && row <= num_rows(), "[data] ", impl_->path, ": row ", row, " is outside its ", num_rows(),
              " rows. HINT: the dataset changed since the loader state was saved");
  impl_->next_row = row;
}

bool ParquetReader::next(ordered_json& row) {
  Impl& m = *impl_;
  if (m.next_row >= num_rows()) return false;
  const int g = row_group();
  if (g != m.group) m.load_group(g);
  const size_t r = static_cast<size_t>(m.next_row - m.group_start[static_cast<size_t>(g)]);
  row = ordered_json::object();
  for (size_t f = 0; f < m.selected.size(); ++f) {
    row[m.selected[f]->name] = nullptr;
    for (const auto& path : m.leaf_paths[f]) m.assemble(path, r, row);
  }
  ++m.next_row;
  return true;
}

ParquetReader::ParquetReader(const std::string& name, const std::string& bytes, size_t max_chunk_bytes)
    : impl_(std::make_unique<Impl>()) {
  impl_->path = name;
  impl_->bytes = std::make_unique<MemoryBytes>(bytes);
  impl_->max_chunk_bytes = max_chunk_bytes;
  impl_->open();
}

void parquet_read_all(const std::string& bytes) {
  ParquetReader reader("<memory>", bytes, size_t{64} << 20);
  std::vector<std::string> readable;
  for (const std::string& f : reader.fields()) {
    try {
      reader.select({f});
      readable.push_back(f);
    } catch (const Error&) {
    }
  }
  reader.select(readable);
  ordered_json row;
  while (reader.next(row)) row.dump();
}

}  // namespace titan::data
