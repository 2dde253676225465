// libFuzzer target: a chat template (tokenizer_config.json's chat_template, untrusted) parsed and
// rendered by the Jinja subset (data/jinja_*.cpp) over a conversation that reaches its branches:
// a system prompt, tools, tool calls and results, reasoning, the generation prompt. titan::Error
// is the answer to a bad or hostile template (one line, jinja.h's limits included); anything else
// escaping (std::bad_alloc, std::out_of_range), a crash, a hang, a runaway allocation or an
// ASan/UBSan report is a finding.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "titan/core/error.h"
#include "titan/data/jinja.h"

namespace {

const titan::data::jinja::Value& variables(bool add_generation_prompt) {
  static const auto make = [](bool agp) {
    nlohmann::ordered_json v = nlohmann::ordered_json::parse(R"({
      "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is 2 + 3? <tool_response>"},
        {"role": "assistant", "content": "<think>\nadd\n</think>\n\n5", "reasoning_content": "add",
         "tool_calls": [{"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 3}}}]},
        {"role": "tool", "content": "5"},
        {"role": "user", "content": ["a", {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": "É 5.", "name": null}
      ],
      "tools": [{"type": "function", "function": {"name": "add", "description": "a + b",
                 "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}],
      "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false, "date_string": "26 Jul 2024",
      "numbers": [3, -1, 2.5, 1e300, -9223372036854775808, 9223372036854775807]})");
    v["add_generation_prompt"] = agp;
    return titan::data::jinja::Value::from_json(v);
  };
  static const titan::data::jinja::Value with = make(true), without = make(false);
  return add_generation_prompt ? with : without;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  try {
    const titan::data::jinja::Template t(source, "fuzz/chat_template");
    // Both settings: the generation prompt is a branch every real template has.
    const std::string a = t.render(variables(false));
    const std::string b = t.render(variables(true));
    if (a.size() > (size_t{64} << 20) || b.size() > (size_t{64} << 20)) __builtin_trap();  // the output limit held
  } catch (const titan::Error&) {
  }
  return 0;
}
