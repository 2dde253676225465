// A chat template is untrusted input: hostile ones are one-line errors naming the limit they pass
// (jinja.h), never a crash (deep nesting overflowed the stack), a hang (nested range loops) or
// unbounded memory (range(10**13), a string doubled in a loop). Each case ends in well under a
// second.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "titan/core/error.h"
#include "titan/data/jinja.h"

namespace titan::data {
namespace {

using nlohmann::ordered_json;

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// The error of rendering `source` ("(no error)" when it renders).
std::string error_of(const std::string& source, const ordered_json& vars = ordered_json::object()) {
  try {
    jinja::Template(source, "test").render(jinja::Value::from_json(vars));
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// The error names the limit, in one line that starts like every template error.
void expect_limit(const std::string& source, const std::string& says, const ordered_json& vars = ordered_json::object()) {
  const std::string e = error_of(source, vars);
  EXPECT_EQ(e.rfind("[chat] test line ", 0), 0u) << e.substr(0, 300);
  EXPECT_NE(e.find(says), std::string::npos) << e.substr(0, 300);
  EXPECT_EQ(e.find('\n'), std::string::npos) << e.substr(0, 300);
}

TEST(ChatJinjaLimits, DeepNestingIsRefusedWhileParsing) {
  const std::string nests = "nests deeper than the limit of 100 levels";
  expect_limit("{{ " + repeat("(", 10000) + "1" + repeat(")", 10000) + " }}", nests);    // was SIGSEGV
  expect_limit(repeat("{% if true %}", 50000) + "x" + repeat("{% endif %}", 50000), nests);  // was SIGSEGV
  expect_limit(repeat("{% for x in [1] %}", 5000) + repeat("{% endfor %}", 5000), nests);
  expect_limit("{{ " + repeat("[", 10000) + repeat("]", 10000) + " }}", nests);
  expect_limit("{{ " + repeat("not ", 10000) + "x }}", nests);
  expect_limit("{{ " + repeat("-", 10000) + "1 }}", nests);
  expect_limit("{{ 1 " + repeat("if x else 1 ", 10000) + "}}", nests);
  // Chains the parser builds in a loop nest as deep (evaluating or freeing them recursed).
  expect_limit("{{ 1" + repeat(" + 1", 100000) + " }}", nests);
  expect_limit("{{ x" + repeat(".a", 100000) + " }}", nests);
  expect_limit("{{ x" + repeat("|string", 100000) + " }}", nests);
  expect_limit("{{ x" + repeat("[0]", 100000) + " }}", nests);
  // The real templates' depth is far inside: 60 nested ifs and a 60-term sum render.
  EXPECT_EQ(error_of(repeat("{% if true %}", 60) + "x" + repeat("{% endif %}", 60)), "(no error)");
  EXPECT_EQ(jinja::Template("{{ 0" + repeat(" + 1", 60) + " }}", "test").render(jinja::Value::object()), "60");
}

TEST(ChatJinjaLimits, RangeLengthAndLoopIterationsAreBounded) {
  expect_limit("{{ range(10000000000000) | length }}", "range() of 10000000000000 items exceeds the limit of 100000 items");
  expect_limit("{% for i in range(-9223372036854775807, 9223372036854775807, 3) %}{% endfor %}",
               "exceeds the limit of 100000 items");
  // 10^15 iterations (a hang): stopped at a million.
  expect_limit("{% for a in range(100000) %}{% for b in range(100000) %}{% for c in range(100000) %}"
               "{% endfor %}{% endfor %}{% endfor %}",
               "the loop iterations of the render exceeds the limit of 1000000 iterations");
  // range() at the limit is Python's range.
  EXPECT_EQ(jinja::Template("{{ range(100000) | length }} {{ range(10, 0, -3) | join(',') }}", "test")
                .render(jinja::Value::object()),
            "100000 10,7,4,1");
}

TEST(ChatJinjaLimits, StringsAndOutputAreBounded) {
  // A string doubled in a loop (reached 14.7 GB): refused past 64 MiB.
  expect_limit("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
               "exceeds the limit of 67108864 bytes");
  expect_limit("{% set ns = namespace(s='xx') %}{% for i in range(64) %}{% set ns.s = ns.s.replace('x', ns.s) %}"
               "{% endfor %}", "exceeds the limit of 67108864 bytes");
  // The output grows by 1 MB a step: refused at 64 MiB.
  expect_limit("{% for i in range(100000) %}{{ big }}{% endfor %}", "the rendered text exceeds the limit of 67108864 bytes",
               ordered_json{{"big", std::string(1 << 20, 'x')}});
}

TEST(ChatJinjaLimits, WorkIsBounded) {
  // A list doubled in a loop: each copy is work (and so memory).
  expect_limit("{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
               "the render's work");
  // A 1 MB string indexed 100,000 times (each index walks its code points): bounded work, not a hang.
  expect_limit("{% for i in range(100000) %}{{ big[i] }}{% endfor %}", "the render's work",
               ordered_json{{"big", std::string(1 << 20, 'x')}});
  // Shared lists nest into a DAG whose tojson text, and whose == walk, are exponential.
  const std::string dag = "{% set ns = namespace(l='x') %}{% for i in range(60) %}{% set ns.l = [ns.l, ns.l] %}"
                          "{% endfor %}";
  expect_limit(dag + "{{ ns.l | tojson }}", "exceeds the limit of 67108864 bytes");
  expect_limit(dag + "{{ ns.l == ns.l }}", "the render's work");
}

TEST(ChatJinjaLimits, ValuesAndIntegersStayBounded) {
  // A list nested in a loop, and a namespace holding itself (a cycle tojson recursed over).
  expect_limit("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}",
               "the nesting of the value stored exceeds the limit of 100 levels");
  expect_limit("{% set ns = namespace(a=1) %}{% set ns.a = ns %}{{ ns | tojson }}",
               "a namespace inside a namespace is outside the supported Jinja subset");
  expect_limit("{% set ns = namespace(a=1) %}{% set m = namespace(b=[ns]) %}", "a namespace inside a namespace");
  // Integers past 64 bits: an error, not undefined behaviour or a trap.
  expect_limit("{{ 99999999999999999999 }}", "does not fit 64 bits");
  expect_limit("{{ 9223372036854775807 + 1 }}", "integer overflow");
  expect_limit("{{ 3037000500 * 3037000500 }}", "integer overflow");
  expect_limit("{{ (-9223372036854775807 - 1) // -1 }}", "integer overflow");
  expect_limit("{{ -(-9223372036854775807 - 1) }}", "integer overflow");
  EXPECT_EQ(jinja::Template("{{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7 // -2 }}", "test").render(jinja::Value::object()),
            "-4 2 -2 -4");  // Python: -7 // 2, -7 % 3, 7 % -3, 7 // -2
  // Near the bottom of the range floor(x / y) * y passes INT64_MIN; the modulo itself does not.
  // Python: (-9223372036854775807) % 3 == 2, since 2**63 - 1 == 1 (mod 3).
  EXPECT_EQ(jinja::Template("{{ -9223372036854775807 % 3 }}", "test").render(jinja::Value::object()), "2");
  // Messages nested deeper than any conversation: one line, not a stack overflow.
  ordered_json deep = 1;
  for (int i = 0; i < 100000; ++i) deep = ordered_json::array({std::move(deep)});
  bool refused = false;
  try {
    jinja::Value::from_json(deep);
  } catch (const Error& e) {
    refused = std::string(e.what()).find("nest deeper than the limit of 100 levels") != std::string::npos;
  }
  EXPECT_TRUE(refused);
}

}  // namespace
}  // namespace titan::data
