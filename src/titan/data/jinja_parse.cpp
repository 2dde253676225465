// Jinja subset: lexing (text / {{ }} / {% %} / {# #} with jinja2's trim_blocks + lstrip_blocks and
// the `-` markers) and a recursive-descent parser with jinja2's precedence:
//   ternary < or < and < not < compare (== != < <= > >= in, not in) < + - < ~ < * / // % < unary -
//   < primary with postfix (.a [i] [a:b:c] (args)) and filters / tests (| f, is t).
#include <algorithm>
#include <charconv>
#include <cstring>

#include "titan/core/error.h"
#include "titan/data/jinja_ast.h"

namespace titan::data::jinja {

std::string where_in(const std::string& where, const std::string& source, size_t pos) {
  size_t line = 1;
  for (size_t k = 0; k < pos && k < source.size(); ++k) line += source[k] == '\n';
  return str(where, " line ", line);
}

namespace {

struct Tag {
  enum class Kind { text, expr, stmt } kind;
  std::string body;  // text, or the tag's inside without delimiters and `-` markers
  size_t pos;        // offset of the body in the source
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// Splits the source into tags. Comments vanish (with their whitespace effects).
std::vector<Tag> lex(const std::string& src, const std::string& where) {
  std::vector<Tag> out;
  size_t i = 0;
  bool strip_next = false;    // a `-` closing marker: the next text loses its leading whitespace
  bool trim_newline = false;  // trim_blocks: after %} or #}, one newline is dropped
  bool line_starting = true;  // the next text starts a line (for lstrip_blocks)
  while (i <= src.size()) {
    size_t open = src.find('{', i);
    while (open != std::string::npos && open + 1 < src.size() && !std::strchr("{%#", src[open + 1])) {
      open = src.find('{', open + 1);
    }
    if (open != std::string::npos && open + 1 >= src.size()) open = std::string::npos;
    std::string text = src.substr(i, open == std::string::npos ? std::string::npos : open - i);
    size_t dropped = 0;
    if (strip_next) {
      while (dropped < text.size() && is_space(text[dropped])) ++dropped;
    } else if (trim_newline && !text.empty() && text[0] == '\n') {
      dropped = 1;
    }
    if (dropped > 0) line_starting = text[dropped - 1] == '\n';
    text.erase(0, dropped);
    if (open == std::string::npos) {
      if (!text.empty()) out.push_back({Tag::Kind::text, text, i});
      break;
    }
    const char kind = src[open + 1];
    const bool minus_open = open + 2 < src.size() && src[open + 2] == '-';
    const bool plus_open = open + 2 < src.size() && src[open + 2] == '+';
    if (minus_open) {
      while (!text.empty() && is_space(text.back())) text.pop_back();
    } else if (kind != '{' && !plus_open) {  // lstrip_blocks: blanks between a line start and the tag
      const size_t nl = text.rfind('\n');
      const size_t line_pos = nl == std::string::npos ? 0 : nl + 1;
      if ((line_pos > 0 || line_starting) && text.find_first_not_of(" \t", line_pos) == std::string::npos) {
        text.resize(line_pos);
      }
    }
    if (!text.empty()) out.push_back({Tag::Kind::text, text, i});
    const char* close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    const size_t body_start = open + 2 + (minus_open || plus_open ? 1 : 0);
    size_t end = body_start;
    if (kind == '#') {
      end = src.find(close, body_start);
    } else {  // skip string literals: a "}}" inside quotes does not close the tag
      char quote = 0;
      for (; end + 1 < src.size(); ++end) {
        const char c = src[end];
        if (quote) {
          if (c == '\\') ++end;
          else if (c == quote) quote = 0;
        } else if (c == '\'' || c == '"') {
          quote = c;
        } else if (c == close[0] && src[end + 1] == close[1]) {
          break;
        }
      }
      if (end + 1 >= src.size()) end = std::string::npos;
    }
    TITAN_CHECK(end != std::string::npos, "[chat] ", where_in(where, src, open), ": unclosed '",
                src.substr(open, 2), "'. HINT: the chat_template is not valid Jinja");
    const bool minus_close = end > body_start && src[end - 1] == '-';
    const size_t body_end = minus_close ? end - 1 : end;
    if (kind != '#') {
      out.push_back({kind == '{' ? Tag::Kind::expr : Tag::Kind::stmt, src.substr(body_start, body_end - body_start),
                     body_start});
    }
    strip_next = minus_close;
    trim_newline = kind != '{';
    line_starting = false;
    i = end + 2;
  }
  return out;
}

// ---- expression tokens ----
struct Tok {
  enum class Kind { name, string, integer, floating, op, end } kind;
  std::string text;
  size_t pos;
};

std::vector<Tok> tokenize(const std::string& body, size_t base, const std::string& src, const std::string& where) {
  std::vector<Tok> out;
  size_t i = 0;
  while (i < body.size()) {
    const char c = body[i];
    if (is_space(c)) { ++i; continue; }
    const size_t pos = base + i;
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t k = i;
      while (k < body.size() && (std::isalnum(static_cast<unsigned char>(body[k])) || body[k] == '_')) ++k;
      out.push_back({Tok::Kind::name, body.substr(i, k - i), pos});
      i = k;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t k = i;
      bool is_float = false;
      while (k < body.size() && (std::isdigit(static_cast<unsigned char>(body[k])) || body[k] == '.')) {
        if (body[k] == '.') {
          if (k + 1 >= body.size() || !std::isdigit(static_cast<unsigned char>(body[k + 1]))) break;
          is_float = true;
        }
        ++k;
      }
      out.push_back({is_float ? Tok::Kind::floating : Tok::Kind::integer, body.substr(i, k - i), pos});
      i = k;
    } else if (c == '\'' || c == '"') {
      std::string s;
      size_t k = i + 1;
      for (; k < body.size() && body[k] != c; ++k) {
        if (body[k] != '\\' || k + 1 >= body.size()) { s += body[k]; continue; }
        const char e = body[++k];
        switch (e) {
          case 'n': s += '\n'; break;
          case 't': s += '\t'; break;
          case 'r': s += '\r'; break;
          case '\\': s += '\\'; break;
          case '\'': s += '\''; break;
          case '"': s += '"'; break;
          case '\n': break;
          default:
            TITAN_FAIL("[chat] ", where_in(where, src, base + k), ": unsupported string escape '\\", e,
                       "'. HINT: the subset knows \\n \\t \\r \\\\ \\' \\\"");
        }
      }
      TITAN_CHECK(k < body.size(), "[chat] ", where_in(where, src, pos), ": unterminated string literal");
      out.push_back({Tok::Kind::string, s, pos});
      i = k + 1;
    } else {
      static const char* kOps[] = {"//", "==", "!=", "<=", ">=", "**", "+", "-", "*", "/", "%", "~", "<", ">",
                                   "(", ")", "[", "]", "{", "}", ".", ",", ":", "|", "="};
      bool found = false;
      for (const char* op : kOps) {
        const size_t n = std::strlen(op);
        if (body.compare(i, n, op) == 0) {
          out.push_back({Tok::Kind::op, op, pos});
          i += n;
          found = true;
          break;
        }
      }
      TITAN_CHECK(found, "[chat] ", where_in(where, src, pos), ": unexpected character '", c,
                  "' in an expression");
    }
  }
  out.push_back({Tok::Kind::end, "", base + body.size()});
  return out;
}

// Counts a recursion level of a parser; past kMaxNesting the template is refused (a deeper
// recursion would overflow the stack: 10,000 nested '(' did).
class NestingGuard {
 public:
  NestingGuard(int& depth, const std::string& where, const std::string& src, size_t pos) : depth_(depth) {
    TITAN_CHECK(++depth_ <= kMaxNesting, "[chat] ", where_in(where, src, pos), ": the template nests deeper than the "
                "limit of ", kMaxNesting, " levels (expressions or blocks). HINT: the chat_template is malformed or "
                "hostile");
  }
  ~NestingGuard() { --depth_; }
  NestingGuard(const NestingGuard&) = delete;
  NestingGuard& operator=(const NestingGuard&) = delete;

 private:
  int& depth_;
};

class ExprParser {
 public:
  ExprParser(std::vector<Tok> toks, const std::string& src, const std::string& where)
      : t_(std::move(toks)), src_(src), where_(where) {}
  ExprParser(ExprParser&&) = default;

  std::unique_ptr<Expr> expression() { return ternary(); }
  // Without the `x if c else y` level: a for loop's iterable, where `if` starts a loop filter.
  std::unique_ptr<Expr> expression_no_ternary() { return or_(); }
  const Tok& peek() const { return t_[k_]; }
  bool at_end() const { return t_[k_].kind == Tok::Kind::end; }
  bool accept_name(const char* n) {
    if (t_[k_].kind == Tok::Kind::name && t_[k_].text == n) { ++k_; return true; }
    return false;
  }
  bool accept_op(const char* o) {
    if (t_[k_].kind == Tok::Kind::op && t_[k_].text == o) { ++k_; return true; }
    return false;
  }
  void expect_op(const char* o) {
    TITAN_CHECK(accept_op(o), "[chat] ", where_in(where_, src_, peek().pos), ": expected '", o, "', found '",
                peek().text, "'");
  }
  std::string expect_name() {
    TITAN_CHECK(peek().kind == Tok::Kind::name, "[chat] ", where_in(where_, src_, peek().pos),
                ": expected a name, found '", peek().text, "'");
    return t_[k_++].text;
  }
  void expect_end(const char* what) {
    TITAN_CHECK(at_end(), "[chat] ", where_in(where_, src_, peek().pos), ": unexpected '", peek().text,
                "' after ", what);
  }

 private:
  static std::unique_ptr<Expr> make(Expr::Op op, size_t pos, std::string name = "") {
    auto e = std::make_unique<Expr>();
    e->op = op;
    e->pos = pos;
    e->name = std::move(name);
    return e;
  }
  // `e` with its depth set from its children's, refused past kMaxNesting: chains the parser
  // builds in a loop (a.b.c..., 1 + 1 + ..., x|f|f...) nest as deep as recursion does, and
  // evaluating or freeing a tree recurses over its depth.
  std::unique_ptr<Expr> sized(std::unique_ptr<Expr> e) const {
    for (const auto& a : e->args) {
      if (a) e->depth = std::max(e->depth, a->depth + 1);
    }
    for (const auto& [k, a] : e->kwargs) e->depth = std::max(e->depth, a->depth + 1);
    TITAN_CHECK(e->depth <= kMaxNesting, "[chat] ", where_in(where_, src_, e->pos), ": the expression nests deeper "
                "than the limit of ", kMaxNesting, " levels. HINT: the chat_template is malformed or hostile");
    return e;
  }
  std::unique_ptr<Expr> binary(std::string op, std::unique_ptr<Expr> a, std::unique_ptr<Expr> b) const {
    auto e = make(Expr::Op::binary, a->pos, std::move(op));
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return sized(std::move(e));
  }

  std::unique_ptr<Expr> ternary() {
    const NestingGuard guard(nesting_, where_, src_, peek().pos);
    auto value = or_();
    while (accept_name("if")) {
      auto e = make(Expr::Op::ternary, value->pos);
      e->args.push_back(or_());
      e->args.push_back(std::move(value));
      e->args.push_back(accept_name("else") ? ternary() : nullptr);
      value = sized(std::move(e));
    }
    return value;
  }
  std::unique_ptr<Expr> or_() {
    auto a = and_();
    while (accept_name("or")) a = binary("or", std::move(a), and_());
    return a;
  }
  std::unique_ptr<Expr> and_() {
    auto a = not_();
    while (accept_name("and")) a = binary("and", std::move(a), not_());
    return a;
  }
  std::unique_ptr<Expr> not_() {
    const size_t pos = peek().pos;
    if (accept_name("not")) {
      const NestingGuard guard(nesting_, where_, src_, pos);
      auto e = make(Expr::Op::not_, pos);
      e->args.push_back(not_());
      return sized(std::move(e));
    }
    return compare();
  }
  std::unique_ptr<Expr> compare() {
    auto a = math1();
    for (;;) {
      std::string op;
      for (const char* o : {"==", "!=", "<=", ">=", "<", ">"}) {
        if (accept_op(o)) { op = o; break; }
      }
      if (op.empty() && accept_name("in")) op = "in";
      if (op.empty() && peek().kind == Tok::Kind::name && peek().text == "not" &&
          t_[k_ + 1].kind == Tok::Kind::name && t_[k_ + 1].text == "in") {
        k_ += 2;
        op = "not in";
      }
      if (op.empty()) return a;
      a = binary(op, std::move(a), math1());
    }
  }
  std::unique_ptr<Expr> math1() {
    auto a = concat();
    for (;;) {
      if (accept_op("+")) a = binary("+", std::move(a), concat());
      else if (accept_op("-")) a = binary("-", std::move(a), concat());
      else return a;
    }
  }
  std::unique_ptr<Expr> concat() {
    auto a = math2();
    while (accept_op("~")) a = binary("~", std::move(a), math2());
    return a;
  }
  std::unique_ptr<Expr> math2() {
    auto a = unary();
    for (;;) {
      std::string op;
      for (const char* o : {"//", "*", "/", "%"}) {
        if (accept_op(o)) { op = o; break; }
      }
      TITAN_CHECK(!accept_op("**"), "[chat] ", where_in(where_, src_, peek().pos), ": operator '**' is outside "
                  "the supported Jinja subset");
      if (op.empty()) return a;
      a = binary(op, std::move(a), unary());
    }
  }
  std::unique_ptr<Expr> unary() {
    const size_t pos = peek().pos;
    std::unique_ptr<Expr> e;
    if (accept_op("-")) {
      e = make(Expr::Op::neg, pos);
      e->args.push_back(unary_no_filter());
      e = sized(std::move(e));
    } else {
      e = postfix(primary());
    }
    return filters(std::move(e));
  }
  std::unique_ptr<Expr> unary_no_filter() {
    const size_t pos = peek().pos;
    if (accept_op("-")) {
      const NestingGuard guard(nesting_, where_, src_, pos);
      auto e = make(Expr::Op::neg, pos);
      e->args.push_back(unary_no_filter());
      return sized(std::move(e));
    }
    return postfix(primary());
  }
  void call_args(Expr& e) {  // after '('
    if (accept_op(")")) return;
    do {
      if (peek().kind == Tok::Kind::name && t_[k_ + 1].kind == Tok::Kind::op && t_[k_ + 1].text == "=") {
        std::string key = t_[k_].text;
        k_ += 2;
        e.kwargs.emplace_back(std::move(key), expression());
      } else {
        e.args.push_back(expression());
      }
    } while (accept_op(","));
    expect_op(")");
  }
  std::unique_ptr<Expr> filters(std::unique_ptr<Expr> e) {
    for (;;) {
      const size_t pos = peek().pos;
      if (accept_op("|")) {
        auto f = make(Expr::Op::filter, pos, expect_name());
        f->args.push_back(std::move(e));
        if (accept_op("(")) call_args(*f);
        e = sized(std::move(f));
      } else if (accept_name("is")) {
        auto t = make(Expr::Op::test, pos);
        t->negate = accept_name("not");
        t->name = expect_name();
        t->args.push_back(std::move(e));
        if (accept_op("(")) {
          call_args(*t);
        } else if (peek().kind == Tok::Kind::string || peek().kind == Tok::Kind::integer ||
                   peek().kind == Tok::Kind::floating ||
                   (peek().kind == Tok::Kind::name && !is_keyword(peek().text))) {
          t->args.push_back(postfix(primary()));  // `is equalto 'x'`, `is sameas false`
        }
        e = sized(std::move(t));
      } else {
        return e;
      }
    }
  }
  static bool is_keyword(const std::string& s) {
    return s == "and" || s == "or" || s == "not" || s == "in" || s == "is" || s == "if" || s == "else";
  }
  std::unique_ptr<Expr> postfix(std::unique_ptr<Expr> e) {
    for (;;) {
      const size_t pos = peek().pos;
      if (accept_op(".")) {
        auto a = make(Expr::Op::attr, pos, expect_name());
        a->args.push_back(std::move(e));
        e = sized(std::move(a));
      } else if (accept_op("[")) {
        std::unique_ptr<Expr> parts[3];
        int n = 0;
        bool is_slice = false;
        for (;;) {
          if (!(peek().kind == Tok::Kind::op && (peek().text == ":" || peek().text == "]"))) parts[n] = expression();
          if (accept_op(":")) {
            is_slice = true;
            TITAN_CHECK(++n < 3, "[chat] ", where_in(where_, src_, pos), ": a slice takes at most 3 parts");
            continue;
          }
          expect_op("]");
          break;
        }
        auto ix = make(is_slice ? Expr::Op::slice : Expr::Op::index, pos);
        ix->args.push_back(std::move(e));
        TITAN_CHECK(is_slice || parts[0], "[chat] ", where_in(where_, src_, pos), ": empty subscript '[]'");
        for (int k = 0; k < (is_slice ? 3 : 1); ++k) ix->args.push_back(std::move(parts[k]));
        e = sized(std::move(ix));
      } else if (accept_op("(")) {
        auto c = make(Expr::Op::call, pos);
        c->args.push_back(std::move(e));
        call_args(*c);
        e = sized(std::move(c));
      } else {
        return e;
      }
    }
  }
  std::unique_ptr<Expr> primary() {
    const Tok tok = peek();
    ++k_;
    switch (tok.kind) {
      case Tok::Kind::string: {
        auto e = make(Expr::Op::literal, tok.pos);
        std::string s = tok.text;
        while (peek().kind == Tok::Kind::string) s += t_[k_++].text;  // adjacent literals join
        e->value = Value::string(std::move(s));
        return e;
      }
      case Tok::Kind::integer: {
        auto e = make(Expr::Op::literal, tok.pos);
        int64_t v = 0;
        const auto [end, ec] = std::from_chars(tok.text.data(), tok.text.data() + tok.text.size(), v);
        TITAN_CHECK(ec == std::errc() && end == tok.text.data() + tok.text.size(), "[chat] ",
                    where_in(where_, src_, tok.pos), ": the integer ", tok.text.substr(0, 40),
                    " does not fit 64 bits (the subset's integers)");
        e->value = Value::integer(v);
        return e;
      }
      case Tok::Kind::floating: {
        auto e = make(Expr::Op::literal, tok.pos);
        e->value = Value::floating(std::strtod(tok.text.c_str(), nullptr));  // inf past the range, as Python
        return e;
      }
      case Tok::Kind::name: {
        auto e = make(Expr::Op::literal, tok.pos);
        const std::string& n = tok.text;
        if (n == "true" || n == "True") e->value = Value::boolean(true);
        else if (n == "false" || n == "False") e->value = Value::boolean(false);
        else if (n == "none" || n == "None") e->value = Value::none();
        else return make(Expr::Op::name, tok.pos, n);
        return e;
      }
      case Tok::Kind::op: {
        if (tok.text == "(") {
          auto e = expression();
          TITAN_CHECK(!accept_op(","), "[chat] ", where_in(where_, src_, tok.pos),
                      ": tuples are outside the supported Jinja subset");
          expect_op(")");
          return e;
        }
        if (tok.text == "[") {
          auto e = make(Expr::Op::list, tok.pos);
          if (!accept_op("]")) {
            do { e->args.push_back(expression()); } while (accept_op(","));
            expect_op("]");
          }
          return sized(std::move(e));
        }
        if (tok.text == "{") {
          auto e = make(Expr::Op::dict, tok.pos);
          if (!accept_op("}")) {
            do {
              auto key = expression();
              TITAN_CHECK(key->op == Expr::Op::literal && key->value.kind == Value::Kind::string, "[chat] ",
                          where_in(where_, src_, key->pos), ": dict keys must be string literals in the subset");
              expect_op(":");
              e->kwargs.emplace_back(key->value.s, expression());
            } while (accept_op(","));
            expect_op("}");
          }
          return sized(std::move(e));
        }
        break;
      }
      case Tok::Kind::end:
        break;
    }
    TITAN_FAIL("[chat] ", where_in(where_, src_, tok.pos), ": unexpected '", tok.kind == Tok::Kind::end ? "end of tag" : tok.text,
               "' in an expression");
  }

  std::vector<Tok> t_;
  size_t k_ = 0;
  int nesting_ = 0;  // recursion levels in progress (NestingGuard)
  const std::string& src_;
  const std::string& where_;
};

// ---- statements ----
class StmtParser {
 public:
  StmtParser(std::vector<Tag> tags, const std::string& src, const std::string& where)
      : tags_(std::move(tags)), src_(src), where_(where) {}

  std::unique_ptr<Node> parse() {
    std::string stop;
    auto body = block({}, &stop);
    return body;
  }

 private:
  ExprParser expr_parser(const Tag& t, size_t skip_words) {
    ExprParser p(tokenize(t.body, t.pos, src_, where_), src_, where_);
    for (size_t k = 0; k < skip_words; ++k) p.expect_name();
    return p;
  }
  std::string keyword(const Tag& t) {
    auto toks = tokenize(t.body, t.pos, src_, where_);
    TITAN_CHECK(toks[0].kind == Tok::Kind::name, "[chat] ", where_in(where_, src_, t.pos), ": empty statement '{%",
                t.body, "%}'");
    return toks[0].text;
  }

  // Parses nodes until a statement whose keyword is in `stops` (returned in *stop), or the end.
  std::unique_ptr<Node> block(const std::vector<std::string>& stops, std::string* stop) {
    const NestingGuard guard(nesting_, where_, src_, i_ < tags_.size() ? tags_[i_].pos : src_.size());
    auto body = std::make_unique<Node>();
    body->kind = Node::Kind::body;
    while (i_ < tags_.size()) {
      const Tag& t = tags_[i_];
      if (t.kind == Tag::Kind::text) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::text;
        n->text = t.body;
        body->children.push_back(std::move(n));
        ++i_;
        continue;
      }
      if (t.kind == Tag::Kind::expr) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::output;
        n->pos = t.pos;
        ExprParser p = expr_parser(t, 0);
        n->expr = p.expression();
        p.expect_end("the expression");
        body->children.push_back(std::move(n));
        ++i_;
        continue;
      }
      const std::string kw = keyword(t);
      for (const auto& s : stops) {
        if (kw == s) {
          *stop = kw;
          return body;
        }
      }
      ++i_;
      if (kw == "if") body->children.push_back(if_(t));
      else if (kw == "for") body->children.push_back(for_(t));
      else if (kw == "set") body->children.push_back(set_(t));
      else if (kw == "generation") body->children.push_back(generation(t));
      else {
        TITAN_FAIL("[chat] ", where_in(where_, src_, t.pos), ": statement '{% ", kw, " %}' is ",
                   stops.empty() && (kw.rfind("end", 0) == 0 || kw == "else" || kw == "elif") ? "unmatched"
                                                                                                : "outside the supported Jinja subset",
                   ". HINT: the subset has if/elif/else, for, set and generation");
      }
    }
    TITAN_CHECK(stops.empty(), "[chat] ", where_, ": the template ends inside a block; expected '{% ", stops.back(),
                " %}'");
    return body;
  }

  std::unique_ptr<Node> if_(const Tag& first) {
    auto n = std::make_unique<Node>();
    n->kind = Node::Kind::if_;
    n->pos = first.pos;
    ExprParser p = expr_parser(first, 1);
    n->conditions.push_back(p.expression());
    p.expect_end("the if condition");
    for (;;) {
      std::string stop;
      n->branches.push_back(block({"elif", "else", "endif"}, &stop));
      const Tag& t = tags_[i_++];
      if (stop == "endif") return n;
      if (stop == "elif") {
        ExprParser q = expr_parser(t, 1);
        n->conditions.push_back(q.expression());
        q.expect_end("the elif condition");
        continue;
      }
      n->branches.push_back(block({"endif"}, &stop));
      ++i_;
      return n;
    }
  }

  std::unique_ptr<Node> for_(const Tag& first) {
    auto n = std::make_unique<Node>();
    n->kind = Node::Kind::for_;
    n->pos = first.pos;
    ExprParser p = expr_parser(first, 1);
    do { n->targets.push_back(p.expect_name()); } while (p.accept_op(","));
    TITAN_CHECK(n->targets.size() <= 2, "[chat] ", where_in(where_, src_, first.pos),
                ": a for loop unpacks at most 2 names in the subset");
    TITAN_CHECK(p.accept_name("in"), "[chat] ", where_in(where_, src_, first.pos), ": expected 'in' in the for loop");
    n->expr = p.expression_no_ternary();
    TITAN_CHECK(!p.accept_name("if"), "[chat] ", where_in(where_, src_, first.pos),
                ": loop filters ('for x in y if c') are outside the supported Jinja subset. HINT: put an "
                "{% if %} inside the loop (loop.* then counts every item)");
    TITAN_CHECK(!p.accept_name("recursive"), "[chat] ", where_in(where_, src_, first.pos),
                ": recursive loops are outside the supported Jinja subset");
    p.expect_end("the for loop");
    std::string stop;
    n->branches.push_back(block({"else", "endfor"}, &stop));
    ++i_;
    if (stop == "else") {
      n->branches.push_back(block({"endfor"}, &stop));
      ++i_;
    }
    return n;
  }

  std::unique_ptr<Node> set_(const Tag& t) {
    auto n = std::make_unique<Node>();
    n->kind = Node::Kind::set;
    n->pos = t.pos;
    ExprParser p = expr_parser(t, 1);
    n->targets.push_back(p.expect_name());
    if (p.accept_op(".")) n->targets.push_back(p.expect_name());
    TITAN_CHECK(p.accept_op("="), "[chat] ", where_in(where_, src_, t.pos),
                ": '{% set ... %}' blocks and tuple targets are outside the supported Jinja subset");
    n->expr = p.expression();
    p.expect_end("the set value");
    return n;
  }

  std::unique_ptr<Node> generation(const Tag& t) {
    expr_parser(t, 1).expect_end("generation");
    std::string stop;
    auto body = block({"endgeneration"}, &stop);
    ++i_;
    return body;
  }

  std::vector<Tag> tags_;
  size_t i_ = 0;
  int nesting_ = 0;  // blocks in progress (NestingGuard)
  const std::string& src_;
  const std::string& where_;
};

}  // namespace

std::unique_ptr<Node> parse_template(const std::string& source, const std::string& where) {
  return StmtParser(lex(source, where), source, where).parse();
}

}  // namespace titan::data::jinja
