// The nesting limits on what titan reads (core/nesting.h): texts built to the limit and one past.
#include <gtest/gtest.h>

#include <string>

#include "titan/core/error.h"
#include "titan/core/nesting.h"

namespace titan {
namespace {

std::string nested_array(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(Nesting, JsonAtTheLimitPassesOnePastFailsNamingTheLine) {
  EXPECT_NO_THROW(check_json_nesting(nested_array(kMaxJsonNesting), "x.json"));
  const std::string deep = "{\n\"a\":\n" + nested_array(kMaxJsonNesting) + "}";  // 257 levels, the 257th on line 3
  try {
    check_json_nesting(deep, "[tokenizer] t.json");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[tokenizer] t.json: nested more than 256 levels deep (arrays/objects) at "
                                         "line 3"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(json_too_deep_at(nested_array(kMaxJsonNesting + 1)), static_cast<size_t>(kMaxJsonNesting));
}

TEST(Nesting, JsonBracketsInsideStringsAreText) {
  // 300 brackets inside a string, escaped quotes and backslashes included, nest nothing.
  const std::string s = "{\"k\": \"" + std::string(300, '[') + "\\\"" + std::string(300, '{') + "\\\\\", \"v\": [1]}";
  EXPECT_NO_THROW(check_json_nesting(s, "s.json"));
  EXPECT_EQ(json_too_deep_at(s), std::string::npos);
  // Closing brackets without openers never count below zero.
  EXPECT_NO_THROW(check_json_nesting("]]]]" + nested_array(kMaxJsonNesting), "c.json"));
}

TEST(Nesting, TomlHeadersAndKeysOfTooManyPartsAreRefused) {
  std::string parts = "a";
  for (int i = 1; i < kMaxTomlKeyParts; ++i) parts += ".a";
  EXPECT_NO_THROW(check_toml_key_parts("[" + parts + "]\nx = 1\n" + parts + " = 2\n", "job.toml"));
  try {
    check_toml_key_parts("[training]\nsteps = 1\n[" + parts + ".a]\n", "job.toml");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("job.toml:3: a table header or key of 65 dotted parts (at most 64)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(check_toml_key_parts("x = {" + parts + ".a = 1}\n", "job.toml"), Error);  // inline table keys
  // Values' dots are not keys: floats, dotted strings, arrays over many lines, comments.
  std::string floats = "x = [";
  for (int i = 0; i < 200; ++i) floats += "1.5, ";
  floats += "\n";
  for (int i = 0; i < 200; ++i) floats += "2.5, ";
  floats += "]\ny = \"" + parts + ".a.a\" # " + parts + ".a\nz = '" + parts + ".b'\n";
  EXPECT_NO_THROW(check_toml_key_parts(floats, "job.toml"));
}

}  // namespace
}  // namespace titan
