// Jinja subset: Value (from JSON, members) and the Python-semantics helpers the evaluator uses:
// truthiness, equality, code points, repr of floats, HF's tojson, str.strip / split / replace.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "titan/core/error.h"
#include "titan/data/jinja_ast.h"

namespace titan::data::jinja {

using Kind = Value::Kind;

Value Value::array(Array a) {
  Value v;
  v.kind = Kind::array;
  for (const Value& x : a) {
    v.depth = std::max(v.depth, x.depth + 1);
    v.holds_namespace = v.holds_namespace || x.holds_namespace;
  }
  v.depth = std::max(v.depth, 1);
  v.arr = std::make_shared<Array>(std::move(a));
  return v;
}

Value Value::object(Object o) {
  Value v;
  v.kind = Kind::object;
  for (const auto& [k, x] : o) {
    v.depth = std::max(v.depth, x.depth + 1);
    v.holds_namespace = v.holds_namespace || x.holds_namespace;
  }
  v.depth = std::max(v.depth, 1);
  v.obj = std::make_shared<Object>(std::move(o));
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& j, int depth) {
  TITAN_CHECK(depth <= kMaxNesting, "[chat] the template's variables (messages, tools) nest deeper than the limit of ",
              kMaxNesting, " levels. HINT: flatten the data");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return none();
    case nlohmann::ordered_json::value_t::boolean: return boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
    case nlohmann::ordered_json::value_t::number_unsigned: return integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_float: return floating(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array a;
      for (const auto& e : j) a.push_back(from_json(e, depth + 1));
      return array(std::move(a));
    }
    case nlohmann::ordered_json::value_t::object: {
      Object o;
      for (auto it = j.begin(); it != j.end(); ++it) o.emplace_back(it.key(), from_json(it.value(), depth + 1));
      return object(std::move(o));
    }
    default: return Value{};
  }
}

const Value* Value::find(const std::string& key) const {
  if (kind != Kind::object) return nullptr;
  for (const auto& [k, v] : *obj) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Value::set(const std::string& key, Value v) {
  for (auto& [k, old] : *obj) {
    if (k == key) { old = std::move(v); return; }
  }
  obj->emplace_back(key, std::move(v));
}


const char* kind_name(const Value& v) {
  switch (v.kind) {
    case Kind::undefined: return "undefined";
    case Kind::none: return "none";
    case Kind::boolean: return "bool";
    case Kind::integer: return "int";
    case Kind::floating: return "float";
    case Kind::string: return "string";
    case Kind::array: return "list";
    case Kind::object: return v.is_namespace ? "namespace" : "dict";
    case Kind::function: return "function";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::undefined:
    case Kind::none: return false;
    case Kind::boolean: return v.b;
    case Kind::integer: return v.i != 0;
    case Kind::floating: return v.f != 0.0;
    case Kind::string: return !v.s.empty();
    case Kind::array: return !v.arr->empty();
    case Kind::object: return v.is_namespace || !v.obj->empty();
    case Kind::function: return true;
  }
  return false;
}

bool is_number(const Value& v) { return v.kind == Kind::integer || v.kind == Kind::floating || v.kind == Kind::boolean; }
double as_double(const Value& v) {
  return v.kind == Kind::floating ? v.f : v.kind == Kind::boolean ? (v.b ? 1.0 : 0.0) : static_cast<double>(v.i);
}

bool equal(const Value& a, const Value& b, int64_t& steps, int64_t max_steps) {
  if (++steps > max_steps) return false;
  if (is_number(a) && is_number(b)) return as_double(a) == as_double(b);
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::undefined:
    case Kind::none: return true;
    case Kind::string:
    case Kind::function: return a.s == b.s;
    case Kind::array: {
      if (a.arr->size() != b.arr->size()) return false;
      for (size_t k = 0; k < a.arr->size(); ++k) {
        if (!equal((*a.arr)[k], (*b.arr)[k], steps, max_steps)) return false;
      }
      return true;
    }
    case Kind::object: {
      if (a.obj == b.obj) return true;
      if (a.obj->size() != b.obj->size()) return false;
      for (const auto& [k, v] : *a.obj) {
        const Value* w = b.find(k);
        if (!w || !equal(v, *w, steps, max_steps)) return false;
      }
      return true;
    }
    default: return false;
  }
}

// UTF-8 code point boundaries of s: offsets of each code point's first byte, plus s.size().
std::vector<size_t> code_points(const std::string& s) {
  std::vector<size_t> at;
  for (size_t k = 0; k < s.size(); ++k) {
    if ((static_cast<unsigned char>(s[k]) & 0xC0) != 0x80) at.push_back(k);
  }
  at.push_back(s.size());
  return at;
}

std::string format_float(double d) {  // Python's repr for the usual cases
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (std::isnan(d)) return "nan";
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

// Python's json.dumps(ensure_ascii=False) with indent None (", " and ": ") or an int indent.
void to_json(const Value& v, int indent, int depth, std::string& out, const std::string& where) {
  // Shared lists can make the text exponential in the template's size: bounded as it grows.
  TITAN_CHECK(out.size() <= kMaxTextBytes, "[chat] ", where, ": tojson's text exceeds the limit of ", kMaxTextBytes,
              " bytes. HINT: the template builds a runaway value");
  TITAN_CHECK(indent <= 1000, "[chat] ", where, ": tojson indent=", indent, " exceeds the limit of 1000");
  auto newline = [&](int d) {
    out += '\n';
    out.append(static_cast<size_t>(indent * d), ' ');
  };
  switch (v.kind) {
    case Kind::none: out += "null"; return;
    case Kind::boolean: out += v.b ? "true" : "false"; return;
    case Kind::integer: out += std::to_string(v.i); return;
    case Kind::floating: out += format_float(v.f); return;
    case Kind::string: {
      out += '"';
      for (unsigned char c : v.s) {
        switch (c) {
          case '"': out += "\\\""; break;
          case '\\': out += "\\\\"; break;
          case '\n': out += "\\n"; break;
          case '\r': out += "\\r"; break;
          case '\t': out += "\\t"; break;
          case '\b': out += "\\b"; break;
          case '\f': out += "\\f"; break;
          default:
            if (c < 0x20) {
              char buf[8];
              std::snprintf(buf, sizeof buf, "\\u%04x", c);
              out += buf;
            } else {
              out += static_cast<char>(c);
            }
        }
      }
      out += '"';
      return;
    }
    case Kind::array:
    case Kind::object: {
      const bool is_array = v.kind == Kind::array;
      const size_t n = is_array ? v.arr->size() : v.obj->size();
      out += is_array ? '[' : '{';
      if (n == 0) { out += is_array ? ']' : '}'; return; }
      for (size_t k = 0; k < n; ++k) {
        if (k > 0) out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(depth + 1);
        if (is_array) {
          to_json((*v.arr)[k], indent, depth + 1, out, where);
        } else {
          to_json(Value::string((*v.obj)[k].first), indent, depth + 1, out, where);
          out += ": ";
          to_json((*v.obj)[k].second, indent, depth + 1, out, where);
        }
      }
      if (indent >= 0) newline(depth);
      out += is_array ? ']' : '}';
      return;
    }
    case Kind::function:
      TITAN_FAIL("[chat] ", where, ": tojson of the function ", v.s, ". HINT: call it");
    case Kind::undefined:
      TITAN_FAIL("[chat] ", where, ": tojson of an undefined value. HINT: check the message fields the template reads");
  }
}

namespace {

// UTF-8 code point at byte k (its byte count in *len); the text is valid UTF-8 (checked on input).
uint32_t code_point_at(const std::string& s, size_t k, size_t* len) {
  const auto c = static_cast<unsigned char>(s[k]);
  const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : 4;
  uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
  for (size_t i = 1; i < n && k + i < s.size(); ++i) cp = (cp << 6) | (static_cast<unsigned char>(s[k + i]) & 0x3F);
  *len = std::min(n, s.size() - k);
  return cp;
}
size_t code_point_before(const std::string& s, size_t end) {  // start of the code point ending at `end`
  size_t k = end - 1;
  while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
  return k;
}

// Python's str.isspace(), which strip() / split() without arguments use.
bool py_space(uint32_t c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

}  // namespace

// Python's strip / lstrip / rstrip: `chars` (a string) is a set of code points, else whitespace.
std::string strip(const std::string& s, const Value* chars, bool left, bool right) {
  const bool custom = chars && chars->kind == Kind::string;
  auto drop = [&](uint32_t cp) {
    if (!custom) return py_space(cp);
    for (size_t k = 0, n = 0; k < chars->s.size(); k += n) {
      if (code_point_at(chars->s, k, &n) == cp) return true;
    }
    return false;
  };
  size_t b = 0, e = s.size(), n = 0;
  if (left) while (b < e && drop(code_point_at(s, b, &n))) b += n;
  if (right) {
    while (e > b) {
      const size_t k = code_point_before(s, e);
      if (!drop(code_point_at(s, k, &n))) break;
      e = k;
    }
  }
  return s.substr(b, e - b);
}

Value split(const std::string& s, const Value* sep, int64_t maxsplit, size_t max_items) {
  Array parts;
  if (!sep || sep->kind == Kind::none) {  // runs of whitespace, no empty parts
    size_t k = 0, n = 0;
    while (k < s.size() && parts.size() <= max_items) {
      while (k < s.size() && py_space(code_point_at(s, k, &n))) k += n;
      if (k >= s.size()) break;
      size_t e = k;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        e = k + strip(s.substr(k), nullptr, false, true).size();
      } else {
        while (e < s.size() && !py_space(code_point_at(s, e, &n))) e += n;
      }
      parts.push_back(Value::string(s.substr(k, e - k)));
      k = e;
    }
    return Value::array(std::move(parts));
  }
  size_t k = 0;
  for (;;) {
    const size_t at = (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) ? std::string::npos
                                                                                         : s.find(sep->s, k);
    if (at == std::string::npos || parts.size() > max_items) {
      parts.push_back(Value::string(s.substr(k)));
      return Value::array(std::move(parts));
    }
    parts.push_back(Value::string(s.substr(k, at - k)));
    k = at + sep->s.size();
  }
}

std::string replace_all(std::string s, const std::string& from, const std::string& to, size_t max_bytes) {
  if (from.empty()) return s;
  std::string out;
  size_t k = 0;
  for (size_t at; (at = s.find(from, k)) != std::string::npos; k = at + from.size()) {
    out.append(s, k, at - k).append(to);
    if (out.size() > max_bytes) return out;
  }
  return out.append(s, k);
}

}  // namespace titan::data::jinja
