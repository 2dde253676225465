// Jinja subset: the evaluator: statements, expressions, filters, tests, methods and functions
// (see jinja.h for the list; values and Python-semantics helpers in jinja_value.cpp).
// Semantics are Python's / jinja2's for what the subset holds; anything else is an error naming it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <map>

#include "titan/core/error.h"
#include "titan/data/jinja_ast.h"

namespace titan::data::jinja {

using Kind = Value::Kind;

namespace {

class Evaluator {
 public:
  Evaluator(const std::string& src, const std::string& where) : src_(src), where_(where) {}

  explicit Evaluator(const std::string& src, const std::string& where, Template::MessageTrace* trace)
      : src_(src), where_(where), trace_(trace) {}

  std::string run(const Node& root, const Value& globals) {
    scopes_.push_back(globals.kind == Kind::object ? *globals.obj : Object{});
    std::string out;
    exec(root, out);
    return out;
  }

 private:
  // ---- the bounds of an untrusted template (jinja.h) ----
  [[noreturn]] void over(size_t pos, const std::string& what, int64_t limit, const char* unit) const {
    fail(pos, str(what, " exceeds the limit of ", limit, " ", unit, ". HINT: the chat_template is hostile or runs away "
                  "(titan bounds a render as a sandbox does)"));
  }
  // Work of the render: bytes made, kEvalCost per evaluated expression.
  void charge(int64_t units, size_t pos) {
    work_ += units;
    if (work_ > kMaxWork) over(pos, "the render's work (bytes of strings and lists made, plus each evaluation)", kMaxWork, "units");
  }
  Value text(std::string s, size_t pos) {
    if (s.size() > kMaxTextBytes) over(pos, str("a string of ", s.size(), " bytes"), static_cast<int64_t>(kMaxTextBytes), "bytes");
    charge(static_cast<int64_t>(s.size()), pos);
    return Value::string(std::move(s));
  }
  void append(std::string& out, const std::string& piece, size_t pos) {
    if (out.size() + piece.size() > kMaxTextBytes) {
      over(pos, "the rendered text", static_cast<int64_t>(kMaxTextBytes), "bytes");
    }
    charge(static_cast<int64_t>(piece.size()), pos);
    out += piece;
  }
  // code_points() of a string: 8 bytes per code point made.
  std::vector<size_t> points(const std::string& str_, size_t pos) {
    charge(8 * static_cast<int64_t>(str_.size()), pos);
    return code_points(str_);
  }
  // A list made of `items` copies (their strings are copied).
  Value list(Array items, size_t pos) {
    int64_t cost = 0;
    for (const Value& v : items) cost += copy_cost(v);
    charge(cost, pos);
    return Value::array(std::move(items));
  }
  bool same(const Value& a, const Value& b, size_t pos) {
    int64_t steps = 0;
    const int64_t left = (kMaxWork - work_) / kEvalCost;
    const bool r = equal(a, b, steps, left);
    charge(steps * kEvalCost, pos);  // fails when the comparison stopped early
    return r;
  }
  struct DepthGuard {
    DepthGuard(Evaluator& ev, size_t pos) : ev_(ev) {
      if (++ev_.depth_ > kMaxEvalDepth) ev_.over(pos, "the evaluation depth", kMaxEvalDepth, "levels");
    }
    ~DepthGuard() { --ev_.depth_; }
    Evaluator& ev_;
  };
  // Python ints are unbounded; the subset's are 64-bit, and overflowing them is an error.
  int64_t checked(bool overflowed, int64_t v, size_t pos) const {
    if (overflowed) fail(pos, "integer overflow (the subset's integers are 64-bit)");
    return v;
  }
  // A value stored into a namespace: no namespace in it (no cycles or chains of namespaces, which
  // make its nesting unbounded) and its nesting within the limit.
  void check_storable(const Value& v, size_t pos) const {
    if (v.holds_namespace) unsupported(pos, "a namespace inside a namespace");
    if (v.depth + 1 > kMaxNesting) over(pos, "the nesting of the value stored", kMaxNesting, "levels");
  }

  [[noreturn]] void fail(size_t pos, const std::string& what) const {
    TITAN_FAIL("[chat] ", where_in(where_, src_, pos), ": ", what);
  }
  [[noreturn]] void unsupported(size_t pos, const std::string& what) const {
    fail(pos, what + " is outside the supported Jinja subset. HINT: titan renders Qwen3, Qwen2.5, Llama 3 and "
                     "ChatML templates; simplify the template or extend data/jinja_eval.cpp");
  }

  static bool is_builtin_function(const std::string& name) {
    return name == "namespace" || name == "raise_exception" || name == "range" || name == "strftime_now" ||
           name == "dict";  // HF's globals (dict() itself is outside the subset)
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
    const DepthGuard guard(*this, n.pos);
    switch (n.kind) {
      case Node::Kind::body:
        for (const auto& c : n.children) exec(*c, out);
        return;
      case Node::Kind::text: append(out, n.text, n.pos); return;
      case Node::Kind::output: append(out, to_text(eval(*n.expr), n.expr->pos), n.expr->pos); return;
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
          check_storable(v, n.pos);
          ns.set(n.targets[1], std::move(v));
        }
        return;
      }
      case Node::Kind::for_: exec_for(n, out); return;
    }
  }

  void exec_for(const Node& n, std::string& out) {
    const Value seq = eval(*n.expr);
    // A list is iterated in place (lists are never changed in place here); a dict's keys and a
    // string's characters are made.
    Array made;
    const Array& items = seq.kind == Kind::array ? *seq.arr : made;
    if (seq.kind == Kind::array) {
    } else if (seq.kind == Kind::object) {  // iterating a dict gives its keys
      for (const auto& [k, v] : *seq.obj) made.push_back(Value::string(k));
    } else if (seq.kind == Kind::string) {
      const auto at = points(seq.s, n.expr->pos);
      charge(static_cast<int64_t>(at.size() * sizeof(Value)), n.expr->pos);
      for (size_t k = 0; k + 1 < at.size(); ++k) made.push_back(Value::string(seq.s.substr(at[k], at[k + 1] - at[k])));
    } else if (seq.kind != Kind::undefined && seq.kind != Kind::none) {
      fail(n.expr->pos, str("cannot iterate over a ", kind_name(seq)));
    } else if (seq.kind == Kind::none) {
      fail(n.expr->pos, "cannot iterate over none");
    }
    const int64_t len = static_cast<int64_t>(items.size());
    // An index, not a pointer: a loop inside this one may add to the list.
    const bool traced = trace_ != nullptr && n.expr->op == Expr::Op::name && n.expr->name == "messages";
    const size_t loop_index = traced ? trace_->loops.size() : 0;
    if (traced) trace_->loops.emplace_back();
    for (int64_t k = 0; k < len; ++k) {
      if (++iterations_ > kMaxLoopIterations) over(n.pos, "the loop iterations of the render", kMaxLoopIterations, "iterations");
      if (traced) trace_->loops[loop_index].push_back(out.size());
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
    const DepthGuard guard(*this, e.pos);
    Value v = eval_op(e);
    charge(kEvalCost + (v.kind == Kind::string ? static_cast<int64_t>(v.s.size()) : 0), e.pos);
    return v;
  }
  Value eval_op(const Expr& e) {
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
        if (v.kind == Kind::integer) return Value::integer(checked(v.i == INT64_MIN, v.i == INT64_MIN ? 0 : -v.i, e.pos));  // -INT64_MIN is UB
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
        Value v = Value::array(std::move(a));
        if (v.depth > kMaxNesting) over(e.pos, "the nesting of a list", kMaxNesting, "levels");
        return v;
      }
      case Expr::Op::dict: {
        Object o;
        for (const auto& [k, x] : e.kwargs) o.emplace_back(k, eval(*x));
        Value v = Value::object(std::move(o));
        if (v.depth > kMaxNesting) over(e.pos, "the nesting of a dict", kMaxNesting, "levels");
        return v;
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
      const auto at = points(v.s, pos);
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
      at = points(v.s, e.pos);
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
    // k in 128 bits: start + step may pass int64 (a step of 2^62).
    for (__int128 k = start; step > 0 ? k < stop : k > stop; k += step) {
      const auto i = static_cast<size_t>(k);
      if (v.kind == Kind::array) items.push_back((*v.arr)[i]);
      else s.append(v.s, at[i], at[i + 1] - at[i]);
    }
    return v.kind == Kind::array ? list(std::move(items), e.pos) : text(std::move(s), e.pos);
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
    if (op == "==") return Value::boolean(same(a, b, e.pos));
    if (op == "!=") return Value::boolean(!same(a, b, e.pos));
    if (op == "in" || op == "not in") return Value::boolean(contains(b, a, e.pos) == (op == "in"));
    if (op == "~") return joined(to_text(a, e.pos), to_text(b, e.pos), e.pos);
    if (op == "<" || op == "<=" || op == ">" || op == ">=") {
      int c = 0;
      if (is_number(a) && is_number(b)) c = as_double(a) < as_double(b) ? -1 : as_double(a) > as_double(b) ? 1 : 0;
      else if (a.kind == Kind::string && b.kind == Kind::string) c = a.s.compare(b.s) < 0 ? -1 : a.s == b.s ? 0 : 1;
      else fail(e.pos, str("cannot compare a ", kind_name(a), " with a ", kind_name(b), " ('", op, "')"));
      return Value::boolean(op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0);
    }
    if (op == "+" && a.kind == Kind::string && b.kind == Kind::string) return joined(a.s, b.s, e.pos);
    if (op == "+" && a.kind == Kind::array && b.kind == Kind::array) {
      charge(static_cast<int64_t>((a.arr->size() + b.arr->size()) * sizeof(Value)), e.pos);  // before copying
      Array c = *a.arr;
      c.insert(c.end(), b.arr->begin(), b.arr->end());
      return list(std::move(c), e.pos);
    }
    if (is_number(a) && is_number(b)) {
      const bool ints = a.kind != Kind::floating && b.kind != Kind::floating;
      const int64_t x = a.kind == Kind::boolean ? a.b : a.i, y = b.kind == Kind::boolean ? b.b : b.i;
      int64_t r = 0;
      if (ints && (op == "+" || op == "-" || op == "*")) {
        const bool overflow = op == "+"   ? __builtin_add_overflow(x, y, &r)
                              : op == "-" ? __builtin_sub_overflow(x, y, &r)
                                          : __builtin_mul_overflow(x, y, &r);
        return Value::integer(checked(overflow, r, e.pos));
      }
      if (op == "+") return Value::floating(as_double(a) + as_double(b));
      if (op == "-") return Value::floating(as_double(a) - as_double(b));
      if (op == "*") return Value::floating(as_double(a) * as_double(b));
      if (as_double(b) == 0.0) fail(e.pos, "division by zero");
      if (op == "/") return Value::floating(as_double(a) / as_double(b));
      if ((op == "//" || op == "%") && ints) {  // Python's floor division and modulo, in integers
        checked(x == INT64_MIN && y == -1, 0, e.pos);
        const int64_t q = x / y - ((x % y != 0) && ((x < 0) != (y < 0)) ? 1 : 0);
        // x - q*y in 128 bits: q*y alone can pass INT64_MIN (x = INT64_MIN + 1, y = 3); the result
        // itself lies between 0 and y.
        return Value::integer(op == "//" ? q : static_cast<int64_t>(static_cast<__int128>(x) - static_cast<__int128>(q) * y));
      }
    }
    fail(e.pos, str("unsupported operand types for '", op, "': ", kind_name(a), " and ", kind_name(b)));
  }

  bool contains(const Value& container, const Value& item, size_t pos) {
    if (container.kind == Kind::string) {
      if (item.kind != Kind::string) fail(pos, str("'in <string>' needs a string on the left, got a ", kind_name(item)));
      return container.s.find(item.s) != std::string::npos;
    }
    if (container.kind == Kind::array) {
      for (const auto& x : *container.arr) {
        if (same(x, item, pos)) return true;
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
        ns.holds_namespace = true;
        for (auto& [k, v] : a.kw) check_storable(v, e.pos);
        for (const auto& [k, x] : e.kwargs) ns.set(k, a.kw[k]);  // in the written order
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
        // Its length first (in 128 bits), then the items: range(10**13) is refused, not made.
        const __int128 span = step > 0 ? __int128{hi} - lo : __int128{lo} - hi;
        const __int128 abs_step = step > 0 ? __int128{step} : -__int128{step};
        const __int128 count = span <= 0 ? 0 : (span + abs_step - 1) / abs_step;
        if (count > kMaxRange) over(e.pos, str("range() of ", static_cast<long long>(std::min<__int128>(count, INT64_MAX)), " items"), kMaxRange, "items");
        Array r;
        for (int64_t k = 0; k < static_cast<int64_t>(count); ++k) r.push_back(Value::integer(static_cast<int64_t>(lo + __int128{k} * step)));
        return list(std::move(r), e.pos);
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

  // The most arguments each method takes here (Python's optional start/end/count are not).
  static size_t max_args(const std::string& m) {
    if (m == "startswith" || m == "endswith" || m == "strip" || m == "lstrip" || m == "rstrip") return 1;
    if (m == "split" || m == "replace" || m == "get") return 2;
    if (m == "lower" || m == "upper" || m == "items" || m == "keys" || m == "values") return 0;
    return SIZE_MAX;  // not a method here: named by the error below
  }

  Value method(const Value& self, const std::string& m, const Args& a, size_t pos) {
    if (a.pos.size() + a.kw.size() > max_args(m)) {
      unsupported(pos, str("'", m, "' with more than ", max_args(m), " argument(s)"));
    }
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
        const size_t max_items = static_cast<size_t>(std::max<int64_t>(0, kMaxWork - work_)) / sizeof(Value);
        charge(static_cast<int64_t>(s.size()), pos);  // the parts' bytes
        Value parts = split(s, sep, maxsplit && maxsplit->kind == Kind::integer ? maxsplit->i : -1, max_items);
        return list(std::move(*parts.arr), pos);
      }
      if (m == "lower" || m == "upper") {
        for (char c : s) {
          if (static_cast<unsigned char>(c) >= 0x80) unsupported(pos, str("'", m, "' of non-ASCII text (Unicode case mapping)"));
        }
        std::string r = s;
        for (char& c : r) c = static_cast<char>(m == "lower" ? std::tolower(static_cast<unsigned char>(c))
                                                               : std::toupper(static_cast<unsigned char>(c)));
        return Value::string(r);
      }
      if (m == "replace") {
        return text(replace_all(s, string_arg(a.at(0, "old"), pos, "replace"), string_arg(a.at(1, "new"), pos, "replace"),
                                kMaxTextBytes),
                    pos);
      }
    }
    if (self.kind == Kind::object && !self.is_namespace) {
      if (m == "items" || m == "keys" || m == "values") {
        Array r;
        for (const auto& [k, v] : *self.obj) {
          if (m == "items") r.push_back(Value::array({Value::string(k), v}));
          else r.push_back(m == "keys" ? Value::string(k) : v);
        }
        return list(std::move(r), pos);
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
      if (v.kind == Kind::string) return Value::integer(static_cast<int64_t>(points(v.s, e.pos).size()) - 1);
      if (v.kind == Kind::array) return Value::integer(static_cast<int64_t>(v.arr->size()));
      if (v.kind == Kind::object) return Value::integer(static_cast<int64_t>(v.obj->size()));
      fail(e.pos, str("'length' of a ", kind_name(v)));
    }
    if (f == "tojson") {  // HF's tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
      if (!a.pos.empty() || a.kw.size() > (a.kw.count("indent") ? 1u : 0u)) {
        unsupported(e.pos, "tojson with arguments other than indent=");
      }
      const Value* indent = a.at(1000, "indent");
      std::string out;
      const int64_t width = indent && indent->kind == Kind::integer ? indent->i : -1;
      if (width > 1000) over(e.pos, "tojson's indent", 1000, "spaces");
      to_json(v, static_cast<int>(std::max<int64_t>(width, -1)), 0, out, where_in(where_, src_, e.pos));
      return text(std::move(out), e.pos);
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
      return list(std::move(r), e.pos);
    }
    if (f == "join") {
      if (v.kind != Kind::array) fail(e.pos, str("'join' of a ", kind_name(v)));
      const Value* sep = a.at(0, "d");
      std::string out;
      for (size_t k = 0; k < v.arr->size(); ++k) {
        if (k > 0 && sep) out += string_arg(sep, e.pos, "join");
        out += to_text((*v.arr)[k], e.pos);
        if (out.size() > kMaxTextBytes) break;  // refused by text()
      }
      return text(std::move(out), e.pos);
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
      return list(std::move(r), e.pos);
    }
    unsupported(e.pos, str("the filter '", f, "'"));
  }

  bool test(const Expr& e) {
    const Value v = eval(*e.args[0]);
    Args a = args_of(e, 1);
    return named_test(e.name, v, a.pos, e.pos);
  }

  bool named_test(const std::string& t, const Value& v, const std::vector<Value>& args, size_t pos) {
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
      return same(v, args[0], pos);
    }
    unsupported(pos, str("the test '", t, "'"));
  }

  // "a" + "b" (~ and + of strings), refused past kMaxTextBytes before it is made.
  Value joined(const std::string& a, const std::string& b, size_t pos) {
    if (a.size() + b.size() > kMaxTextBytes) {
      over(pos, str("a string of ", a.size() + b.size(), " bytes"), static_cast<int64_t>(kMaxTextBytes), "bytes");
    }
    return text(a + b, pos);
  }

  const std::string& src_;
  const std::string& where_;
  Template::MessageTrace* trace_ = nullptr;
  std::vector<Object> scopes_;  // globals, then one per for-loop iteration
  int depth_ = 0;               // exec/eval calls in progress
  int64_t iterations_ = 0;      // loop iterations of this render
  int64_t work_ = 0;            // charge()
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

std::string Template::render(const Value& variables, MessageTrace& trace) const {
  return Evaluator(source_, where_, &trace).run(*root_, variables);
}

}  // namespace titan::data::jinja
