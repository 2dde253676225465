// The Jinja subset's syntax tree and value helpers (private to the jinja_*.cpp files). Every node keeps
// its byte offset in the template source, so errors name the template line.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "titan/data/jinja.h"

namespace titan::data::jinja {

// The bounds of jinja.h. Real templates (Qwen3's, Llama 3's, ChatML) nest under 10 levels, loop
// over the messages and tools, and render a conversation: these are far above any of them.
inline constexpr int kMaxNesting = 100;                  // parse: nested expressions or blocks; values
inline constexpr int kMaxEvalDepth = 4 * kMaxNesting;    // exec/eval calls in progress
inline constexpr int64_t kMaxRange = 100000;             // items of one range(), Transformers' MAX_RANGE
inline constexpr int64_t kMaxLoopIterations = 1000000;   // iterations of all loops of one render
inline constexpr size_t kMaxTextBytes = size_t{64} << 20;  // any string value, and the output
inline constexpr int64_t kMaxWork = int64_t{1} << 30;    // units of one render (bytes made + kEvalCost each eval)
inline constexpr int64_t kEvalCost = 32;

struct Expr {
  enum class Op {
    literal,    // value
    name,       // name
    attr,       // args[0].name
    index,      // args[0][args[1]]
    slice,      // args[0][args[1]:args[2]:args[3]] (a null arg = omitted)
    call,       // args[0](args[1..]) with kwargs
    filter,     // args[0] | name(args[1..]) with kwargs
    test,       // args[0] is [not] name(args[1..]); negate
    not_,       // not args[0]
    neg,        // -args[0]
    binary,     // args[0] name args[1]: + - * / // % ~ == != < <= > >= in "not in" and or
    ternary,    // args[1] if args[0] else args[2] (args[2] null: undefined)
    list,       // [args...]
    dict,       // {keys[i]: args[i]}
  };
  Op op = Op::literal;
  size_t pos = 0;
  int depth = 1;  // of this subtree (the parser refuses more than kMaxNesting)
  std::string name;
  Value value;
  bool negate = false;
  std::vector<std::unique_ptr<Expr>> args;
  std::vector<std::pair<std::string, std::unique_ptr<Expr>>> kwargs;  // call/filter name=value
};

struct Node {
  enum class Kind { text, output, if_, for_, set, body };
  Kind kind = Kind::body;
  size_t pos = 0;
  std::string text;                                    // text
  std::unique_ptr<Expr> expr;                          // output, set value, for iterable
  std::vector<std::unique_ptr<Expr>> conditions;       // if: one per branch (else: none)
  std::vector<std::unique_ptr<Node>> branches;         // if: bodies (+ else); for: body (+ else)
  std::vector<std::string> targets;                    // for: loop variables; set: name[, attr]
  std::vector<std::unique_ptr<Node>> children;         // body
};

// "template line L" for an offset into `source`.
std::string where_in(const std::string& where, const std::string& source, size_t pos);

std::unique_ptr<Node> parse_template(const std::string& source, const std::string& where);

// Python / jinja2 semantics on values (jinja_value.cpp).
const char* kind_name(const Value& v);                  // "string", "list", "dict", ...
bool truthy(const Value& v);                            // Python's bool()
bool is_number(const Value& v);                         // int, float or bool
double as_double(const Value& v);
// Python's ==; `steps` counts the values compared (shared lists make a DAG whose walk can be
// exponential): past `max_steps` it stops early, and the caller fails naming the limit.
bool equal(const Value& a, const Value& b, int64_t& steps, int64_t max_steps);
std::vector<size_t> code_points(const std::string& s);  // first byte of each code point, then size()
std::string format_float(double d);                     // Python's repr of a float
// json.dumps(v, ensure_ascii=False, indent=indent or None) as HF's tojson; `where` names errors,
// also an output past kMaxTextBytes.
void to_json(const Value& v, int indent, int depth, std::string& out, const std::string& where);
std::string strip(const std::string& s, const Value* chars, bool left, bool right);  // str.strip family
// str.split; stops after max_items + 1 parts (the caller refuses that many).
Value split(const std::string& s, const Value* sep, int64_t maxsplit, size_t max_items);
// Every `from` replaced by `to`; stops once the result passes max_bytes (the caller refuses it).
std::string replace_all(std::string s, const std::string& from, const std::string& to,
                        size_t max_bytes = std::string::npos);
// The bytes a copy of `v` makes (a list's items are shared, a string is copied).
inline int64_t copy_cost(const Value& v) {
  return static_cast<int64_t>(sizeof(Value) + (v.kind == Value::Kind::string ? v.s.size() : 0));
}

}  // namespace titan::data::jinja
