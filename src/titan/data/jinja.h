// A Jinja subset: what the chat templates real models ship need (Qwen3's with its thinking and tool
// branches, Qwen2.5's, Llama 3.1/3.2's, plain ChatML), rendered as Transformers renders them
// (jinja2 with trim_blocks, lstrip_blocks, no autoescape, the final newline of the template dropped,
// HF's tojson and raise_exception). The llama.cpp minja idea, kept small.
//
// Supported:
//   {{ expr }}  {% if/elif/else/endif %}  {% for x[, y] in expr %}...{% else %}...{% endfor %} with
//   loop.index/index0/revindex/revindex0/first/last/length/previtem/nextitem,
//   {% set x = expr %}, {% set ns.attr = expr %}, {% generation %}...{% endgeneration %} (rendered
//   as its body), {# comments #}, whitespace control ({%- -%} {{- -}} {#- -#}).
//   Expressions: literals (strings, ints, floats, true/false/none, lists, dicts), names, a.b, a[i],
//   slices a[b:e:s], calls, `|filter(args)`, `is [not] test(args)`, not/and/or, in/not in,
//   == != < <= > >=, + - * / // %, ~, `x if c else y`.
//   Filters: length count tojson(indent=) trim string lower upper first last join items reject select
//   default list reverse replace. Tests: defined undefined none string number integer float boolean
//   true false mapping iterable sequence equalto eq.
//   Methods: str.startswith endswith split strip lstrip rstrip lower upper replace; dict.items keys
//   values get. Functions: namespace(...), raise_exception(msg), range(...), strftime_now(fmt) (and
//   `dict` is defined, as in HF, but not callable).
// Anything else (macros, includes, break/continue, loop filters, tojson options other than indent,
// a filter or method not listed, printing a list) is a titan::Error
// "[chat] template line L: ..." naming the construct: never a silently different rendering.
//
// A template is untrusted input (a tokenizer folder's chat_template renders every conversation of
// a training run): parsing and rendering are bounded, each bound a one-line titan::Error
// "[chat] <where>: ... exceeds the limit of N ..." naming it (jinja_ast.h holds the numbers):
// nesting of expressions, blocks and values; evaluation depth; range() length (100,000 as
// Transformers' sandbox); loop iterations of one render; the length of any string and of the
// output; and the work of one render (bytes of strings and lists made, plus a charge per
// evaluated expression), so that no template crashes, hangs or grows without end. Integer
// arithmetic that overflows 64 bits is an error (Python's ints are unbounded), and a namespace()
// cannot hold a namespace (no cycles, no unbounded chains).
//
// Undefined follows jinja2's default: printing it gives "", it is false, it compares unequal, and
// its attributes or arithmetic on it are errors. Strings are UTF-8; length, indexing and slicing
// count code points, as Python does.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace titan::data::jinja {

struct Value;
using Array = std::vector<Value>;
using Object = std::vector<std::pair<std::string, Value>>;  // insertion order, as Python dicts

struct Value {
  // function: a built-in global (namespace, raise_exception, range, strftime_now) named by s, so
  // that `strftime_now is defined` is true as under Transformers.
  enum class Kind { undefined, none, boolean, integer, floating, string, array, object, function };
  Kind kind = Kind::undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0.0;
  std::string s;
  std::shared_ptr<Array> arr;   // shared: Jinja values are references
  std::shared_ptr<Object> obj;  // a dict, or (is_namespace) a namespace() object

  bool is_namespace = false;
  // Nesting of lists / dicts (0 for a scalar; a namespace counts 1, whatever it holds later) and
  // whether a namespace is in it: fixed when the value is made (jinja_value.cpp).
  int depth = 0;
  bool holds_namespace = false;

  static Value none() { Value v; v.kind = Kind::none; return v; }
  static Value boolean(bool x) { Value v; v.kind = Kind::boolean; v.b = x; return v; }
  static Value integer(int64_t x) { Value v; v.kind = Kind::integer; v.i = x; return v; }
  static Value floating(double x) { Value v; v.kind = Kind::floating; v.f = x; return v; }
  static Value string(std::string x) { Value v; v.kind = Kind::string; v.s = std::move(x); return v; }
  static Value array(Array a = {});
  static Value object(Object o = {});
  static Value function(std::string name) { Value v; v.kind = Kind::function; v.s = std::move(name); return v; }
  // Throws naming the limit when `j` nests deeper than the template limits allow.
  static Value from_json(const nlohmann::ordered_json& j, int depth = 0);

  const Value* find(const std::string& key) const;  // object member or nullptr
  void set(const std::string& key, Value v);        // object member, replaced or appended
};

struct Node;  // the parsed template (jinja.cpp)

class Template {
 public:
  // Parses `source`; throws titan::Error "[chat] template line L: ..." for a syntax error or a
  // statement outside the subset. `where` names the template in errors (e.g. a file path).
  Template(std::string source, std::string where);
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // Renders with `variables` (an object: messages, add_generation_prompt, bos_token, ...).
  std::string render(const Value& variables) const;

  // Where each message's rendering starts: the output's size at the start of each iteration of
  // every `{% for x in messages %}` loop (the plain variable; messages[::-1] and the like are not
  // recorded), one list per such loop run. Chat masking uses it to find assistant turns in one
  // render instead of one render per turn (chat_template.cpp checks it against the per-turn way).
  struct MessageTrace {
    std::vector<std::vector<size_t>> loops;
  };
  std::string render(const Value& variables, MessageTrace& trace) const;

 private:
  std::string source_;
  std::string where_;
  std::unique_ptr<Node> root_;
};

}  // namespace titan::data::jinja
