// The Jinja subset's syntax tree (private to jinja_parse.cpp and jinja_eval.cpp). Every node keeps
// its byte offset in the template source, so errors name the template line.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "titan/data/jinja.h"

namespace titan::data::jinja {

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

}  // namespace titan::data::jinja
