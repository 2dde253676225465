// Jinja subset: values, the evaluator, filters, tests and methods (see jinja.h for the list).
// Semantics are Python's / jinja2's for what the subset holds; anything else is an error naming it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>

#include "titan/core/error.h"
#include "titan/data/jinja_ast.h"

namespace titan::data::jinja {

using Kind = Value::Kind;

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return none();
    case nlohmann::ordered_json::value_t::boolean: return boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
    case nlohmann::ordered_json::value_t::number_unsigned: return integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_float: return floating(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array a;
      for (const auto& e : j) a.push_back(from_json(e));
      return array(std::move(a));
    }
    case nlohmann::ordered_json::value_t::object: {
      Object o;
      for (auto it = j.begin(); it != j.end(); ++it) o.emplace_back(it.key(), from_json(it.value()));
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

namespace {

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

bool equal(const Value& a, const Value& b) {
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
        if (!equal((*a.arr)[k], (*b.arr)[k])) return false;
      }
      return true;
    }
    case Kind::object: {
      if (a.obj == b.obj) return true;
      if (a.obj->size() != b.obj->size()) return false;
      for (const auto& [k, v] : *a.obj) {
        const Value* w = b.find(k);
        if (!w || !equal(v, *w)) return false;
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

Value split(const std::string& s, const Value* sep, int64_t maxsplit) {
  Array parts;
  if (!sep || sep->kind == Kind::none) {  // runs of whitespace, no empty parts
    size_t k = 0, n = 0;
    while (k < s.size()) {
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
    if (at == std::string::npos) {
      parts.push_back(Value::string(s.substr(k)));
      return Value::array(std::move(parts));
    }
    parts.push_back(Value::string(s.substr(k, at - k)));
    k = at + sep->s.size();
  }
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  std::string out;
  size_t k = 0;
  for (size_t at; (at = s.find(from, k)) != std::string::npos; k = at + from.size()) out += s.substr(k, at - k) + to;
  return out + s.substr(k);
}

class Evaluator {
 public:
  Evaluator(const std::string& src, const std::string& where) : src_(src), where_(where) {}

  std::string run(const Node& root, const Value& globals) {
    scopes_.push_back(globals.kind == Kind::object ? *globals.obj : Object{});
    std::string out;
    exec(root, out);
    return out;
  }

 private:
  [[noreturn]] void fail(size_t pos, const std::string& what) const {
    TITAN_FAIL("[chat] ", where_in(where_, src_, pos), ": ", what);
  }
  [[noreturn]] void unsupported(size_t pos, const std::string& what) const {
    fail(pos, what + " is outside the supported Jinja subset. HINT: titan renders Qwen3, Qwen2.5, Llama 3 and "
                     "ChatML templates; simplify the template or extend data/jinja_eval.cpp");
  }

  static bool is_builtin_function(const std::string& name) {
    return name == "namespace" || name == "raise_exception" || name == "range" || name == "strftime_now";
  }

  // ---- scopes ----
  Value lookup(const std::string& name) const {
    for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s) {
      for (const auto& [k, v] : *s) {
        if (k == name) return v;
      }
    }
    return Value{};
  }
  void assign(const std::string& name, Value v) {
    for (auto& [k, old] : scopes_.back()) {
      if (k == name) { old = std::move(v); return; }
    }
    scopes_.back().emplace_back(name, std::move(v));
  }

  // ---- statements ----
  void exec(const Node& n, std::string& out) {
    switch (n.kind) {
      case Node::Kind::body:
        for (const auto& c : n.children) exec(*c, out);
        return;
      case Node::Kind::text: out += n.text; return;
      case Node::Kind::output: out += to_text(eval(*n.expr), n.expr->pos); return;
      case Node::Kind::if_:
        for (size_t k = 0; k < n.branches.size(); ++k) {
          if (k >= n.conditions.size() || truthy(eval(*n.conditions[k]))) {
            exec(*n.branches[k], out);
            return;
          }
        }
        return;
      case Node::Kind::set: {
        Value v = eval(*n.expr);
        if (n.targets.size() == 1) {
          assign(n.targets[0], std::move(v));
        } else {
          Value ns = lookup(n.targets[0]);
          if (!ns.is_namespace) fail(n.pos, str("'set ", n.targets[0], ".", n.targets[1], "' needs a namespace(), got ", kind_name(ns)));
          ns.set(n.targets[1], std::move(v));
        }
        return;
      }
      case Node::Kind::for_: exec_for(n, out); return;
    }
  }

  void exec_for(const Node& n, std::string& out) {
    const Value seq = eval(*n.expr);
    Array items;
    if (seq.kind == Kind::array) {
      items = *seq.arr;
    } else if (seq.kind == Kind::object) {  // iterating a dict gives its keys
      for (const auto& [k, v] : *seq.obj) items.push_back(Value::string(k));
    } else if (seq.kind == Kind::string) {
      const auto at = code_points(seq.s);
      for (size_t k = 0; k + 1 < at.size(); ++k) items.push_back(Value::string(seq.s.substr(at[k], at[k + 1] - at[k])));
    } else if (seq.kind != Kind::undefined && seq.kind != Kind::none) {
      fail(n.expr->pos, str("cannot iterate over a ", kind_name(seq)));
    } else if (seq.kind == Kind::none) {
      fail(n.expr->pos, "cannot iterate over none");
    }
    const int64_t len = static_cast<int64_t>(items.size());
    for (int64_t k = 0; k < len; ++k) {
      Object scope;
      const Value& item = items[static_cast<size_t>(k)];
      if (n.targets.size() == 1) {
        scope.emplace_back(n.targets[0], item);
      } else {
        if (item.kind != Kind::array || item.arr->size() != 2) {
          fail(n.pos, str("cannot unpack a ", kind_name(item), " into ", n.targets.size(), " loop variables"));
        }
        scope.emplace_back(n.targets[0], (*item.arr)[0]);
        scope.emplace_back(n.targets[1], (*item.arr)[1]);
      }
      Value loop = Value::object({{"index", Value::integer(k + 1)},
                                  {"index0", Value::integer(k)},
                                  {"revindex", Value::integer(len - k)},
                                  {"revindex0", Value::integer(len - k - 1)},
                                  {"first", Value::boolean(k == 0)},
                                  {"last", Value::boolean(k == len - 1)},
                                  {"length", Value::integer(len)},
                                  {"previtem", k > 0 ? items[static_cast<size_t>(k - 1)] : Value{}},
                                  {"nextitem", k + 1 < len ? items[static_cast<size_t>(k + 1)] : Value{}}});
      scope.emplace_back("loop", std::move(loop));
      scopes_.push_back(std::move(scope));
      exec(*n.branches[0], out);
      scopes_.pop_back();
    }
    if (len == 0 && n.branches.size() > 1) exec(*n.branches[1], out);
  }

  std::string to_text(const Value& v, size_t pos) const {
    switch (v.kind) {
      case Kind::undefined: return "";
      case Kind::none: return "None";
      case Kind::boolean: return v.b ? "True" : "False";
      case Kind::integer: return std::to_string(v.i);
      case Kind::floating: return format_float(v.f);
      case Kind::string: return v.s;
      default: unsupported(pos, str("printing a ", kind_name(v), " (Python repr)"));
    }
  }

  // ---- expressions ----
  Value eval(const Expr& e) {
    switch (e.op) {
      case Expr::Op::literal: return e.value;
      case Expr::Op::name: {
        Value v = lookup(e.name);
        if (v.kind == Kind::undefined && is_builtin_function(e.name)) return Value::function(e.name);
        return v;
      }
      case Expr::Op::attr: return attribute(eval(*e.args[0]), e.name, e.pos);
      case Expr::Op::index: return subscript(eval(*e.args[0]), eval(*e.args[1]), e.pos);
      case Expr::Op::slice: return slice(e);
      case Expr::Op::call: return call(e);
      case Expr::Op::filter: return filter(e);
      case Expr::Op::test: return Value::boolean(test(e) != e.negate);
      case Expr::Op::not_: return Value::boolean(!truthy(eval(*e.args[0])));
      case Expr::Op::neg: {
        Value v = eval(*e.args[0]);
        if (v.kind == Kind::integer) return Value::integer(-v.i);
        if (v.kind == Kind::floating) return Value::floating(-v.f);
        fail(e.pos, str("cannot negate a ", kind_name(v)));
      }
      case Expr::Op::binary: return binary(e);
      case Expr::Op::ternary:
        if (truthy(eval(*e.args[0]))) return eval(*e.args[1]);
        return e.args[2] ? eval(*e.args[2]) : Value{};
      case Expr::Op::list: {
        Array a;
        for (const auto& x : e.args) a.push_back(eval(*x));
        return Value::array(std::move(a));
      }
      case Expr::Op::dict: {
        Object o;
        for (const auto& [k, x] : e.kwargs) o.emplace_back(k, eval(*x));
        return Value::object(std::move(o));
      }
    }
    fail(e.pos, "unknown expression");
  }

  Value attribute(const Value& v, const std::string& name, size_t pos) {
    if (v.kind == Kind::undefined) fail(pos, str("'", name, "' of an undefined value. HINT: check the message fields"));
    if (v.kind == Kind::object) {
      const Value* m = v.find(name);
      return m ? *m : Value{};
    }
    return Value{};  // a method name; call() resolves it
  }

  Value subscript(const Value& v, const Value& key, size_t pos) {
    if (v.kind == Kind::undefined) fail(pos, "indexing an undefined value. HINT: check the message fields");
    if (v.kind == Kind::object) {
      if (key.kind != Kind::string) return Value{};
      const Value* m = v.find(key.s);
      return m ? *m : Value{};
    }
    if ((v.kind == Kind::array || v.kind == Kind::string) && key.kind == Kind::integer) {
      if (v.kind == Kind::array) {
        const int64_t n = static_cast<int64_t>(v.arr->size());
        const int64_t k = key.i < 0 ? key.i + n : key.i;
        return k >= 0 && k < n ? (*v.arr)[static_cast<size_t>(k)] : Value{};
      }
      const auto at = code_points(v.s);
      const int64_t n = static_cast<int64_t>(at.size()) - 1;
      const int64_t k = key.i < 0 ? key.i + n : key.i;
      if (k < 0 || k >= n) return Value{};
      return Value::string(v.s.substr(at[static_cast<size_t>(k)], at[static_cast<size_t>(k) + 1] - at[static_cast<size_t>(k)]));
    }
    fail(pos, str("cannot index a ", kind_name(v), " with a ", kind_name(key)));
  }

  Value slice(const Expr& e) {
    const Value v = eval(*e.args[0]);
    int64_t p[3] = {0, 0, 1};
    bool given[3] = {false, false, false};
    for (int k = 0; k < 3; ++k) {
      if (!e.args[static_cast<size_t>(k) + 1]) continue;
      const Value x = eval(*e.args[static_cast<size_t>(k) + 1]);
      if (x.kind == Kind::none) continue;
      if (x.kind != Kind::integer) fail(e.pos, str("slice bounds must be integers, got a ", kind_name(x)));
      p[k] = x.i;
      given[k] = true;
    }
    if (p[2] == 0) fail(e.pos, "slice step cannot be zero");
    std::vector<size_t> at;
    int64_t n = 0;
    if (v.kind == Kind::array) {
      n = static_cast<int64_t>(v.arr->size());
    } else if (v.kind == Kind::string) {
      at = code_points(v.s);
      n = static_cast<int64_t>(at.size()) - 1;
    } else {
      fail(e.pos, str("cannot slice a ", kind_name(v)));
    }
    // Python's slice.indices
    const int64_t step = p[2];
    auto clamp = [&](int64_t x, bool is_given, int64_t dflt) {
      if (!is_given) return dflt;
      if (x < 0) x += n;
      if (step > 0) return std::min(std::max<int64_t>(x, 0), n);
      return std::min(std::max<int64_t>(x, -1), n - 1);
    };
    const int64_t start = clamp(p[0], given[0], step > 0 ? 0 : n - 1);
    const int64_t stop = clamp(p[1], given[1], step > 0 ? n : -1);
    Array items;
    std::string s;
    for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
      if (v.kind == Kind::array) items.push_back((*v.arr)[static_cast<size_t>(k)]);
      else s += v.s.substr(at[static_cast<size_t>(k)], at[static_cast<size_t>(k) + 1] - at[static_cast<size_t>(k)]);
    }
    return v.kind == Kind::array ? Value::array(std::move(items)) : Value::string(std::move(s));
  }

  Value binary(const Expr& e) {
    const std::string& op = e.name;
    if (op == "and") {
      Value a = eval(*e.args[0]);
      return truthy(a) ? eval(*e.args[1]) : a;
    }
    if (op == "or") {
      Value a = eval(*e.args[0]);
      return truthy(a) ? a : eval(*e.args[1]);
    }
    const Value a = eval(*e.args[0]);
    const Value b = eval(*e.args[1]);
    if (op == "==") return Value::boolean(equal(a, b));
    if (op == "!=") return Value::boolean(!equal(a, b));
    if (op == "in" || op == "not in") return Value::boolean(contains(b, a, e.pos) == (op == "in"));
    if (op == "~") return Value::string(to_text(a, e.pos) + to_text(b, e.pos));
    if (op == "<" || op == "<=" || op == ">" || op == ">=") {
      int c = 0;
      if (is_number(a) && is_number(b)) c = as_double(a) < as_double(b) ? -1 : as_double(a) > as_double(b) ? 1 : 0;
      else if (a.kind == Kind::string && b.kind == Kind::string) c = a.s.compare(b.s) < 0 ? -1 : a.s == b.s ? 0 : 1;
      else fail(e.pos, str("cannot compare a ", kind_name(a), " with a ", kind_name(b), " ('", op, "')"));
      return Value::boolean(op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0);
    }
    if (op == "+" && a.kind == Kind::string && b.kind == Kind::string) return Value::string(a.s + b.s);
    if (op == "+" && a.kind == Kind::array && b.kind == Kind::array) {
      Array c = *a.arr;
      c.insert(c.end(), b.arr->begin(), b.arr->end());
      return Value::array(std::move(c));
    }
    if (is_number(a) && is_number(b)) {
      const bool ints = a.kind != Kind::floating && b.kind != Kind::floating;
      const int64_t x = a.kind == Kind::boolean ? a.b : a.i, y = b.kind == Kind::boolean ? b.b : b.i;
      if (op == "+") return ints ? Value::integer(x + y) : Value::floating(as_double(a) + as_double(b));
      if (op == "-") return ints ? Value::integer(x - y) : Value::floating(as_double(a) - as_double(b));
      if (op == "*") return ints ? Value::integer(x * y) : Value::floating(as_double(a) * as_double(b));
      if (as_double(b) == 0.0) fail(e.pos, "division by zero");
      if (op == "/") return Value::floating(as_double(a) / as_double(b));
      if (op == "//" && ints) return Value::integer(static_cast<int64_t>(std::floor(static_cast<double>(x) / y)));
      if (op == "%" && ints) return Value::integer(((x % y) + y) % y);
    }
    fail(e.pos, str("unsupported operand types for '", op, "': ", kind_name(a), " and ", kind_name(b)));
  }

  bool contains(const Value& container, const Value& item, size_t pos) const {
    if (container.kind == Kind::string) {
      if (item.kind != Kind::string) fail(pos, str("'in <string>' needs a string on the left, got a ", kind_name(item)));
      return container.s.find(item.s) != std::string::npos;
    }
    if (container.kind == Kind::array) {
      for (const auto& x : *container.arr) {
        if (equal(x, item)) return true;
      }
      return false;
    }
    if (container.kind == Kind::object) return item.kind == Kind::string && container.find(item.s) != nullptr;
    fail(pos, str("'in' needs a string, list or dict on the right, got a ", kind_name(container)));
  }

  struct Args {
    std::vector<Value> pos;
    std::map<std::string, Value> kw;
    const Value* at(size_t k, const char* name) const {
      if (k < pos.size()) return &pos[k];
      auto it = kw.find(name);
      return it == kw.end() ? nullptr : &it->second;
    }
  };
  Args args_of(const Expr& e, size_t first) {
    Args a;
    for (size_t k = first; k < e.args.size(); ++k) a.pos.push_back(eval(*e.args[k]));
    for (const auto& [k, x] : e.kwargs) a.kw[k] = eval(*x);
    return a;
  }
  const std::string& string_arg(const Value* v, size_t pos, const char* what) const {
    if (!v || v->kind != Kind::string) fail(pos, str(what, " needs a string argument"));
    return v->s;
  }

  Value call(const Expr& e) {
    const Expr& callee = *e.args[0];
    Args a = args_of(e, 1);
    if (callee.op == Expr::Op::name) {
      const std::string& f = callee.name;
      if (f == "namespace") {
        Value ns = Value::object();
        ns.is_namespace = true;
        for (auto& [k, v] : a.kw) ns.set(k, v);
        for (const auto& [k, x] : e.kwargs) ns.set(k, a.kw[k]);  // keep the written order
        return ns;
      }
      if (f == "raise_exception") {
        TITAN_FAIL("[chat] ", where_in(where_, src_, e.pos), ": the template raised: ",
                   a.pos.empty() ? std::string("(no message)") : to_text(a.pos[0], e.pos));
      }
      if (f == "range") {
        int64_t lo = 0, hi = 0, step = 1;
        for (const auto& v : a.pos) {
          if (v.kind != Kind::integer) fail(e.pos, "range() needs integers");
        }
        if (a.pos.size() == 1) hi = a.pos[0].i;
        else if (a.pos.size() >= 2) { lo = a.pos[0].i; hi = a.pos[1].i; }
        if (a.pos.size() == 3) step = a.pos[2].i;
        if (step == 0 || a.pos.empty()) fail(e.pos, "range() needs 1 to 3 integers and a non-zero step");
        Array r;
        for (int64_t k = lo; step > 0 ? k < hi : k > hi; k += step) r.push_back(Value::integer(k));
        return Value::array(std::move(r));
      }
      if (f == "strftime_now") {
        const std::time_t now = std::time(nullptr);
        std::tm tm{};
        localtime_r(&now, &tm);
        char buf[128];
        const size_t n = std::strftime(buf, sizeof buf, string_arg(a.at(0, "format"), e.pos, "strftime_now").c_str(), &tm);
        return Value::string(std::string(buf, n));
      }
      const Value v = lookup(f);
      unsupported(e.pos, v.kind == Kind::undefined ? str("the function '", f, "'") : str("calling '", f, "'"));
    }
    if (callee.op != Expr::Op::attr) unsupported(e.pos, "this call");
    const Value self = eval(*callee.args[0]);
    return method(self, callee.name, a, e.pos);
  }

  Value method(const Value& self, const std::string& m, const Args& a, size_t pos) {
    if (self.kind == Kind::string) {
      const std::string& s = self.s;
      if (m == "startswith" || m == "endswith") {
        const std::string& x = string_arg(a.at(0, "prefix"), pos, m.c_str());
        const bool r = m == "startswith" ? s.compare(0, x.size(), x) == 0 && s.size() >= x.size()
                                         : s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
        return Value::boolean(r);
      }
      if (m == "strip") return Value::string(strip(s, a.at(0, "chars"), true, true));
      if (m == "lstrip") return Value::string(strip(s, a.at(0, "chars"), true, false));
      if (m == "rstrip") return Value::string(strip(s, a.at(0, "chars"), false, true));
      if (m == "split") {
        const Value* sep = a.at(0, "sep");
        if (sep && sep->kind == Kind::string && sep->s.empty()) fail(pos, "split() with an empty separator");
        if (sep && sep->kind != Kind::string && sep->kind != Kind::none) fail(pos, "split() needs a string separator");
        const Value* maxsplit = a.at(1, "maxsplit");
        return split(s, sep, maxsplit && maxsplit->kind == Kind::integer ? maxsplit->i : -1);
      }
      if (m == "lower" || m == "upper") {
        std::string r = s;
        for (char& c : r) c = static_cast<char>(m == "lower" ? std::tolower(static_cast<unsigned char>(c))
                                                               : std::toupper(static_cast<unsigned char>(c)));
        return Value::string(r);
      }
      if (m == "replace") {
        return Value::string(replace_all(s, string_arg(a.at(0, "old"), pos, "replace"),
                                         string_arg(a.at(1, "new"), pos, "replace")));
      }
    }
    if (self.kind == Kind::object && !self.is_namespace) {
      if (m == "items" || m == "keys" || m == "values") {
        Array r;
        for (const auto& [k, v] : *self.obj) {
          if (m == "items") r.push_back(Value::array({Value::string(k), v}));
          else r.push_back(m == "keys" ? Value::string(k) : v);
        }
        return Value::array(std::move(r));
      }
      if (m == "get") {
        const Value* found = self.find(string_arg(a.at(0, "key"), pos, "get"));
        if (found) return *found;
        const Value* d = a.at(1, "default");
        return d ? *d : Value::none();
      }
    }
    if (self.kind == Kind::undefined) fail(pos, str("'", m, "()' of an undefined value. HINT: check the message fields"));
    unsupported(pos, str("the method '", m, "' on a ", kind_name(self)));
  }

  Value filter(const Expr& e) {
    const std::string& f = e.name;
    const Value v = eval(*e.args[0]);
    Args a = args_of(e, 1);
    if (f == "length" || f == "count") {
      if (v.kind == Kind::string) return Value::integer(static_cast<int64_t>(code_points(v.s).size()) - 1);
      if (v.kind == Kind::array) return Value::integer(static_cast<int64_t>(v.arr->size()));
      if (v.kind == Kind::object) return Value::integer(static_cast<int64_t>(v.obj->size()));
      fail(e.pos, str("'length' of a ", kind_name(v)));
    }
    if (f == "tojson") {
      const Value* indent = a.at(0, "indent");
      std::string out;
      to_json(v, indent && indent->kind == Kind::integer ? static_cast<int>(indent->i) : -1, 0, out,
              where_in(where_, src_, e.pos));
      return Value::string(out);
    }
    if (f == "trim") {
      if (v.kind != Kind::string) fail(e.pos, str("'trim' of a ", kind_name(v)));
      return Value::string(strip(v.s, a.at(0, "chars"), true, true));
    }
    if (f == "string") return v.kind == Kind::string ? v : Value::string(to_text(v, e.pos));
    if (f == "lower" || f == "upper" || f == "replace") {
      if (v.kind != Kind::string) fail(e.pos, str("'", f, "' of a ", kind_name(v)));
      return method(v, f, a, e.pos);
    }
    if (f == "items") {
      if (v.kind != Kind::object) fail(e.pos, str("'items' of a ", kind_name(v)));
      return method(v, "items", {}, e.pos);
    }
    if (f == "first" || f == "last") {
      if (v.kind != Kind::array) fail(e.pos, str("'", f, "' of a ", kind_name(v)));
      if (v.arr->empty()) return Value{};
      return f == "first" ? v.arr->front() : v.arr->back();
    }
    if (f == "list") {
      if (v.kind == Kind::array) return v;
      if (v.kind == Kind::object) return method(v, "keys", {}, e.pos);
      fail(e.pos, str("'list' of a ", kind_name(v)));
    }
    if (f == "reverse") {
      if (v.kind != Kind::array) fail(e.pos, str("'reverse' of a ", kind_name(v)));
      Array r(v.arr->rbegin(), v.arr->rend());
      return Value::array(std::move(r));
    }
    if (f == "join") {
      if (v.kind != Kind::array) fail(e.pos, str("'join' of a ", kind_name(v)));
      const Value* sep = a.at(0, "d");
      std::string out;
      for (size_t k = 0; k < v.arr->size(); ++k) {
        if (k > 0 && sep) out += string_arg(sep, e.pos, "join");
        out += to_text((*v.arr)[k], e.pos);
      }
      return Value::string(out);
    }
    if (f == "default" || f == "d") {
      const Value* d = a.at(0, "default_value");
      const Value* boolean = a.at(1, "boolean");
      const bool use = v.kind == Kind::undefined || (boolean && truthy(*boolean) && !truthy(v));
      return use ? (d ? *d : Value::string("")) : v;
    }
    if (f == "reject" || f == "select") {
      if (v.kind != Kind::array) fail(e.pos, str("'", f, "' of a ", kind_name(v)));
      if (a.pos.empty() || a.pos[0].kind != Kind::string) unsupported(e.pos, str("'", f, "' without a test name"));
      Array r;
      for (const auto& x : *v.arr) {
        const bool t = named_test(a.pos[0].s, x, std::vector<Value>(a.pos.begin() + 1, a.pos.end()), e.pos);
        if (t == (f == "select")) r.push_back(x);
      }
      return Value::array(std::move(r));
    }
    unsupported(e.pos, str("the filter '", f, "'"));
  }

  bool test(const Expr& e) {
    const Value v = eval(*e.args[0]);
    Args a = args_of(e, 1);
    return named_test(e.name, v, a.pos, e.pos);
  }

  bool named_test(const std::string& t, const Value& v, const std::vector<Value>& args, size_t pos) const {
    if (t == "defined") return v.kind != Kind::undefined;
    if (t == "undefined") return v.kind == Kind::undefined;
    if (t == "none") return v.kind == Kind::none;
    if (t == "string") return v.kind == Kind::string;
    if (t == "number") return v.kind == Kind::integer || v.kind == Kind::floating;
    if (t == "integer") return v.kind == Kind::integer;
    if (t == "float") return v.kind == Kind::floating;
    if (t == "boolean") return v.kind == Kind::boolean;
    if (t == "true") return v.kind == Kind::boolean && v.b;
    if (t == "false") return v.kind == Kind::boolean && !v.b;
    if (t == "mapping") return v.kind == Kind::object;
    if (t == "iterable") return v.kind == Kind::array || v.kind == Kind::object || v.kind == Kind::string;
    if (t == "sequence") return v.kind == Kind::array || v.kind == Kind::string || v.kind == Kind::object;
    if (t == "equalto" || t == "eq" || t == "==") {
      if (args.empty()) fail(pos, str("test '", t, "' needs a value"));
      return equal(v, args[0]);
    }
    unsupported(pos, str("the test '", t, "'"));
  }

  const std::string& src_;
  const std::string& where_;
  std::vector<Object> scopes_;  // globals, then one per for-loop iteration
};

}  // namespace

Template::Template(std::string source, std::string where) : where_(std::move(where)) {
  // jinja2's lexer: newlines normalised to \n, and (keep_trailing_newline off) one final \n dropped.
  source = replace_all(replace_all(std::move(source), "\r\n", "\n"), "\r", "\n");
  if (!source.empty() && source.back() == '\n') source.pop_back();
  source_ = std::move(source);
  root_ = parse_template(source_, where_);
}

Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const Value& variables) const {
  return Evaluator(source_, where_).run(*root_, variables);
}

}  // namespace titan::data::jinja
