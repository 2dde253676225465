// Chat templates: titan's Jinja subset renders every fixture conversation exactly as Transformers'
// apply_chat_template did (tests/fixtures/chat/chat_templates.json, tools/make_chat_fixtures.py),
// the Qwen3 ids equal HF's, the assistant mask is the hand-checked one, and constructs outside the
// subset are one-line errors naming them.
#include <gtest/gtest.h>

#include <regex>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "unit/data/data_test_util.h"
#include "titan/core/error.h"
#include "titan/data/chat_template.h"
#include "titan/data/jinja.h"

namespace titan::data {
namespace {

using nlohmann::ordered_json;

const std::string kQwen3Dir = titan::testing::source_path("../shared/assets/qwen3-tokenizer");

ordered_json fixtures() {
  std::ifstream in(titan::testing::source_path("tests/fixtures/chat/chat_templates.json"));
  EXPECT_TRUE(in.good()) << "tests/fixtures/chat/chat_templates.json is missing";
  std::stringstream buf;
  buf << in.rdbuf();
  return ordered_json::parse(buf.str());
}

// The options of a fixture case as template variables (apply_chat_template's **kwargs).
ordered_json case_variables(const ordered_json& options) {
  ordered_json vars = options.value("variables", ordered_json::object());
  if (options.contains("enable_thinking")) vars["enable_thinking"] = options["enable_thinking"];
  return vars;
}

std::string render_jinja(const std::string& source, const ordered_json& vars = ordered_json::object()) {
  return jinja::Template(source, "test").render(jinja::Value::from_json(vars));
}

std::string error_of(const std::string& source, const ordered_json& vars = ordered_json::object()) {
  try {
    render_jinja(source, vars);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ChatTemplate, RendersEveryFixtureConversationAsTransformers) {
  const ordered_json f = fixtures();
  const Tokenizer qwen3 = Tokenizer::from_file(kQwen3Dir);
  size_t checked = 0;
  for (const auto& [name, t] : f["templates"].items()) {
    const ChatTemplate chat(t["template"].get<std::string>(), name);
    for (const auto& c : t["cases"]) {
      const ordered_json& opts = c["options"];
      const bool agp = opts["add_generation_prompt"].get<bool>();
      if (c.contains("error")) {  // the template's raise_exception under Transformers: titan raises it too
        try {
          chat.render(c["messages"], agp, case_variables(opts));
          ADD_FAILURE() << name << " / " << c["name"] << ": no error, Transformers raised " << c["error"];
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("the template raised: " + c["error"].get<std::string>()), std::string::npos)
              << e.what();
        }
        ++checked;
        continue;
      }
      const std::string got = chat.render(c["messages"], agp, case_variables(opts));
      ASSERT_EQ(got, c["text"].get<std::string>()) << name << " / " << c["name"] << " " << opts.dump();
      if (c.contains("ids")) {
        ASSERT_EQ(qwen3.encode(got), c["ids"].get<std::vector<int32_t>>()) << name << " / " << c["name"];
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 202u);  // 58 qwen3 + 32 qwen2_5 + 48 llama3_1 (3 of them errors) + 32 chatml + 32 chatml_generation
}

TEST(ChatTemplate, FromFolderReadsQwen3AndItsTokens) {
  const ChatTemplate chat = ChatTemplate::from_folder(kQwen3Dir);
  const ordered_json msgs = ordered_json::parse(R"([{"role":"user","content":"Hi"},{"role":"assistant","content":"Yo"}])");
  EXPECT_EQ(chat.render(msgs, false), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nYo<|im_end|>\n");
  EXPECT_EQ(chat.end_of_turn(), "<|im_end|>");
}

// [user, assistant (thinking, dropped: before the last query), user, assistant] with Qwen3; ids
// from HF (fixture case thinking_earlier_only); kept tokens read off HF's ids by hand: 16..24 are
// "2 + 3 = 5.<|im_end|>", 39..57 are "<think>\n\n</think>\n\n(2 + 3) x 4 = 20.<|im_end|>".
TEST(ChatTemplate, AssistantMaskIsTheHandCheckedOne) {
  const ordered_json f = fixtures();
  const ChatTemplate chat = ChatTemplate::from_folder(kQwen3Dir);
  const Tokenizer tok = Tokenizer::from_file(kQwen3Dir);
  const ordered_json* found = nullptr;
  for (const auto& c : f["templates"]["qwen3"]["cases"]) {
    if (c["name"] == "thinking_earlier_only" && c["options"] == ordered_json{{"add_generation_prompt", false}}) found = &c;
  }
  ASSERT_NE(found, nullptr);
  const ChatTokens ct = encode_chat(chat, tok, (*found)["messages"], true);
  ASSERT_EQ(ct.ids, (*found)["ids"].get<std::vector<int32_t>>());
  std::vector<uint8_t> want(59, 0);
  for (int k = 16; k <= 24; ++k) want[k] = 1;
  for (int k = 39; k <= 57; ++k) want[k] = 1;
  EXPECT_EQ(ct.mask, want);
  EXPECT_EQ(ct.ids[24], 151645);  // <|im_end|> kept, the "\n" after it (25) not
  EXPECT_EQ(ct.ids[57], 151645);
  const ChatTokens all = encode_chat(chat, tok, (*found)["messages"], false);
  EXPECT_EQ(all.mask, std::vector<uint8_t>(59, 1));
}

TEST(ChatTemplate, AssistantSpansForLlamaAndChatml) {
  const ordered_json f = fixtures();
  const ordered_json msgs = ordered_json::parse(
      R"([{"role":"system","content":"S"},{"role":"user","content":"U"},{"role":"assistant","content":" A1 "},
          {"role":"user","content":"V"},{"role":"assistant","content":"A2"}])");
  const ChatTemplate llama(f["templates"]["llama3_1"]["template"].get<std::string>(), "llama",
                           ordered_json{{"bos_token", "<|begin_of_text|>"}});
  const std::string text = llama.render(msgs, false);
  const auto spans = llama.assistant_spans(msgs, text);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(text.substr(spans[0].first, spans[0].second - spans[0].first), "A1<|eot_id|>");  // content|trim
  EXPECT_EQ(text.substr(spans[1].first, spans[1].second - spans[1].first), "A2<|eot_id|>");
  const ChatTemplate chatml(f["templates"]["chatml"]["template"].get<std::string>(), "chatml");
  const std::string t2 = chatml.render(msgs, false);
  const auto s2 = chatml.assistant_spans(msgs, t2);
  ASSERT_EQ(s2.size(), 2u);
  EXPECT_EQ(t2.substr(s2[0].first, s2[0].second - s2[0].first), " A1 <|im_end|>");
  EXPECT_EQ(t2.substr(s2[1].first), "A2<|im_end|>\n");
  EXPECT_EQ(s2[1].second, t2.size() - 1);
}

// Outside truth for the mask rule: a ChatML template with HF's {% generation %} markers around an
// assistant's content + <|im_end|>, whose assistant_masks Transformers computed
// (return_assistant_tokens_mask); titan, reading no markers, finds the same tokens on every case.
TEST(ChatTemplate, MaskEqualsTransformersGenerationMask) {
  const ordered_json f = fixtures();
  const Tokenizer tok = Tokenizer::from_file(kQwen3Dir);
  const ordered_json& t = f["templates"]["chatml_generation"];
  const ChatTemplate chat(t["template"].get<std::string>(), "chatml_generation");
  size_t checked = 0, kept = 0;
  for (const auto& c : t["cases"]) {
    if (!c.contains("assistant_mask")) continue;
    const ChatTokens ct = encode_chat(chat, tok, c["messages"], true);
    ASSERT_EQ(ct.ids, c["ids"].get<std::vector<int32_t>>()) << c["name"];
    const std::vector<int> want = c["assistant_mask"].get<std::vector<int>>();
    EXPECT_EQ(std::vector<int>(ct.mask.begin(), ct.mask.end()), want) << c["name"];
    for (int m : want) kept += static_cast<size_t>(m);
    ++checked;
  }
  EXPECT_EQ(checked, 19u);  // the 16 conversations without generation prompt, the tool ones also with tools
  EXPECT_GT(kept, 100u);
}

// Every fixture conversation of every template: one span per assistant message, each ending with
// the template's end-of-turn marker and holding the message's (trimmed) answer text.
TEST(ChatTemplate, AssistantSpansOnEveryFixtureConversation) {
  const ordered_json f = fixtures();
  size_t spans_checked = 0;
  for (const auto& [name, t] : f["templates"].items()) {
    const ChatTemplate chat(t["template"].get<std::string>(), name);
    for (const auto& c : t["cases"]) {
      if (c.contains("error") || c["options"]["add_generation_prompt"].get<bool>()) continue;
      const std::string text = c["text"].get<std::string>();
      ASSERT_EQ(chat.render(c["messages"], false, case_variables(c["options"])), text);
      const auto spans = chat.assistant_spans(c["messages"], text, case_variables(c["options"]));
      std::vector<std::string> answers;
      for (const auto& m : c["messages"]) {
        if (m["role"] != "assistant") continue;
        std::string a = m["content"].get<std::string>();
        const size_t think = a.rfind("</think>");
        if (think != std::string::npos) a = a.substr(think + 8);
        const size_t b = a.find_first_not_of(" \t\n"), e = a.find_last_not_of(" \t\n");
        answers.push_back(b == std::string::npos ? "" : a.substr(b, e - b + 1));
      }
      ASSERT_EQ(spans.size(), answers.size()) << name << " / " << c["name"];
      for (size_t k = 0; k < spans.size(); ++k) {
        const std::string span = text.substr(spans[k].first, spans[k].second - spans[k].first);
        EXPECT_TRUE(span.ends_with(chat.end_of_turn())) << name << " / " << c["name"] << ": " << span;
        EXPECT_NE(span.find(answers[k]), std::string::npos) << name << " / " << c["name"] << ": " << span;
        EXPECT_EQ(span.find(chat.end_of_turn()), span.size() - chat.end_of_turn().size()) << span;
        ++spans_checked;
      }
    }
  }
  EXPECT_GT(spans_checked, 60u);
}

// Long conversations (issue 49: 8,000 turns took 51 s, one prefix render per assistant turn): the
// spans of the one-render path equal the per-turn reference's on every fixture template, with and
// without thinking blocks; a template whose turns render differently when last (loop.last) fails
// on both paths with the reference's error.
TEST(ChatTemplate, LongConversationsGiveTheReferenceSpans) {
  const ordered_json f = fixtures();
  ordered_json long_chat = ordered_json::array({{{"role", "system"}, {"content", "Be brief."}}});
  for (int k = 0; k < 60; ++k) {
    long_chat.push_back({{"role", "user"}, {"content", "question " + std::to_string(k)}});
    const std::string answer = k % 3 == 0 ? "<think>\nstep " + std::to_string(k) + "\n</think>\n\nanswer" : "answer";
    long_chat.push_back({{"role", "assistant"}, {"content", answer + " " + std::to_string(k)}});
  }
  // The spans as text, or the error: both paths must give the same either way.
  const auto outcome = [](auto spans) {
    try {
      std::string out;
      for (const auto& [b, e] : spans()) out += std::to_string(b) + "-" + std::to_string(e) + " ";
      return out;
    } catch (const Error& e) {
      return std::string(e.what());
    }
  };
  size_t templates = 0, spans = 0;
  for (const auto& [name, t] : f["templates"].items()) {
    const ChatTemplate chat(t["template"].get<std::string>(), name);
    for (const bool think : {false, true}) {
      ordered_json conversation = long_chat;
      if (!think) {
        for (auto& m : conversation) m["content"] = std::regex_replace(m["content"].get<std::string>(), std::regex("<think>[^<]*</think>\\s*"), "");
      }
      for (const ordered_json& options : {ordered_json::object(), ordered_json{{"enable_thinking", false}}}) {
        const std::string text = chat.render(conversation, false, options);
        const std::string want = outcome([&] { return chat.assistant_spans_by_prefixes(conversation, text, options); });
        EXPECT_EQ(outcome([&] { return chat.assistant_spans(conversation, text, options); }), want)
            << name << " " << options.dump() << (think ? " with thinking" : "");
        if (want.find("[chat]") == std::string::npos) spans += 60;
      }
    }
    ++templates;
  }
  EXPECT_GE(templates, 4u);
  EXPECT_GE(spans, 4u * 60u) << "most templates give spans on the conversation without thinking blocks";
  const ChatTemplate last("{% for m in messages %}{{ m.role }}: {{ m.content }}{% if loop.last %}!{% endif %}<|end|>\n"
                          "{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}",
                          "last");
  const std::string text = last.render(long_chat, false);
  const std::string want = outcome([&] { return last.assistant_spans_by_prefixes(long_chat, text); });
  EXPECT_NE(want.find("is not a prefix of the whole conversation"), std::string::npos) << want;
  EXPECT_EQ(outcome([&] { return last.assistant_spans(long_chat, text); }), want);
}

// Jinja semantics the templates lean on (scopes, slices, whitespace control, filters, tests): each
// snippet as Transformers' compiled environment rendered it (fixture "snippets").
TEST(ChatJinja, SubsetSemanticsAsTransformers) {
  const ordered_json f = fixtures();
  ASSERT_GE(f["snippets"].size(), 17u);
  for (const auto& s : f["snippets"]) {
    ASSERT_TRUE(s["text"].is_string()) << s["template"];
    EXPECT_EQ(render_jinja(s["template"].get<std::string>(), s["variables"]), s["text"].get<std::string>())
        << s["template"];
  }
}

TEST(ChatJinja, ConstructsOutsideTheSubsetAreOneLineErrors) {
  EXPECT_NE(error_of("a\n{% macro f() %}{% endmacro %}").find("test line 2: statement '{% macro %}' is outside"), std::string::npos)
      << error_of("a\n{% macro f() %}{% endmacro %}");
  EXPECT_NE(error_of("{{ 'x' | wordcount }}").find("the filter 'wordcount' is outside the supported Jinja subset"), std::string::npos);
  EXPECT_NE(error_of("{{ 'x'.zfill(3) }}").find("the method 'zfill' on a string"), std::string::npos);
  EXPECT_NE(error_of("{{ x is odd }}").find("the test 'odd'"), std::string::npos);
  EXPECT_NE(error_of("{{ [1] }}").find("printing a list"), std::string::npos);
  EXPECT_NE(error_of("{% include 'x' %}").find("'{% include %}' is outside"), std::string::npos);
  EXPECT_NE(error_of("{% if true %}x").find("expected '{% endif %}'"), std::string::npos);
  EXPECT_NE(error_of("{{ raise_exception('bad roles') }}").find("the template raised: bad roles"), std::string::npos);
  EXPECT_NE(error_of("{{ x.y }}").find("'y' of an undefined value"), std::string::npos);
  EXPECT_NE(error_of("{{ [1] | tojson(sort_keys=true) }}").find("tojson with arguments other than indent="), std::string::npos);
  EXPECT_NE(error_of("{{ 'abc'.startswith('b', 1) }}").find("'startswith' with more than 1 argument(s)"), std::string::npos);
  EXPECT_NE(error_of("{{ 'É'.lower() }}").find("'lower' of non-ASCII text"), std::string::npos);
  EXPECT_NE(error_of("{{ [1] | tojson(4) }}").find("tojson with arguments other than indent="), std::string::npos);
  EXPECT_NE(error_of("{% for x in [1] %}{% break %}{% endfor %}").find("'{% break %}' is outside"), std::string::npos);
  for (const char* src : {"{% macro f() %}{% endmacro %}", "{{ 'x' | wordcount }}", "{{ [1] }}"}) {
    EXPECT_EQ(error_of(src).find('\n'), std::string::npos) << src;
  }
}

// Malformed templates: each a titan::Error of one line naming the template line, never a crash.
TEST(ChatJinja, MalformedTemplatesAreOneLineErrors) {
  for (const char* src : {"{{", "{%", "{#", "{{ }}", "{{ a[ }}", "{{ 'abc }}", "{% for %}", "{% for x %}{% endfor %}",
                          "{% if %}{% endif %}", "{% endif %}", "{% else %}", "{% if a %}{% else %}{% else %}{% endif %}",
                          "{{ a. }}", "{{ (1 }}", "{{ [1, }}", "{{ {'a' 1} }}", "{{ a | }}", "{{ a is }}", "{{ 1 +}}",
                          "{% set %}", "{% set x %}{% endset %}", "{{ 'x' 'y' ) }}", "{{ a[1:2:3:4] }}", "{{ f(a=) }}",
                          "{{ 'a' \\ }}", "{% for a, b, c in x %}{% endfor %}", "{{ x if }}", "{{ 1 ** 2 }}",
                          "{{ (1, 2) }}", "{% for x in y if x %}{% endfor %}", "{{ '\\q' }}", "{{ @ }}"}) {
    const std::string e = error_of(src, ordered_json{{"a", 1}, {"x", {1}}, {"y", {1}}});
    EXPECT_EQ(e.rfind("[chat] test", 0), 0u) << src << " -> " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << src << " -> " << e;
  }
}

// Templates where Transformers keeps them (tests/fixtures/chat/folders, tools/make_chat_folder_fixtures.py):
// chat_template.jinja over tokenizer_config.json's entry, the list form's "default", a processor's
// chat_template.json only when the tokenizer has none. Each folder renders (text and ids) what
// AutoTokenizer.from_pretrained(folder).apply_chat_template rendered.
TEST(ChatTemplate, FolderLocationsRenderAsTransformers) {
  const std::string root = titan::testing::source_path("tests/fixtures/chat/folders");
  std::ifstream in(root + "/expected.json");
  ASSERT_TRUE(in.good()) << root << "/expected.json is missing";
  std::stringstream buf;
  buf << in.rdbuf();
  const ordered_json expected = ordered_json::parse(buf.str());
  const Tokenizer qwen3 = Tokenizer::from_file(kQwen3Dir);
  ASSERT_EQ(expected["folders"].size(), 7u);
  for (const auto& [name, cases] : expected["folders"].items()) {
    const std::string folder = root + "/" + name;
    const ChatTemplate chat = ChatTemplate::from_folder(folder);
    // llama3_v5 is a whole Transformers 5 folder: its own tokenizer.json, whose TemplateProcessing
    // adds <|begin_of_text|> to plain text; a rendered conversation carries its own (bos_token in the
    // template) and is encoded without, as apply_chat_template does.
    const bool own = std::filesystem::exists(folder + "/tokenizer.json");
    std::optional<Tokenizer> folder_tok;
    if (own) {
      folder_tok.emplace(Tokenizer::from_file(folder));
      EXPECT_FALSE(folder_tok->special_prefix().empty()) << name << ": the layout under test adds a BOS";
    }
    const Tokenizer& tok = own ? *folder_tok : qwen3;
    for (const auto& c : cases) {
      const std::string got = chat.render(c["messages"], c["add_generation_prompt"].get<bool>());
      EXPECT_EQ(got, c["text"].get<std::string>()) << name;
      EXPECT_EQ(tok.encode(got), c["ids"].get<std::vector<int32_t>>()) << name;
    }
  }
}

TEST(ChatTemplate, FolderWithoutTemplateAndBadMessages) {
  testing::TempDir dir;
  testing::write_file(dir.file("tokenizer_config.json"), R"({"bos_token": null})");
  try {
    ChatTemplate::from_folder(dir.path());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer_config.json has no \"chat_template\" and there is no chat_template.jinja or "
                                         "chat_template.json beside it. HINT:"), std::string::npos) << e.what();
  }
  // A template without an end-of-turn marker renders, but cannot mask.
  const ChatTemplate bare("{% for m in messages %}{{ m.content }}{% endfor %}", "bare");
  EXPECT_EQ(bare.render(ordered_json::parse(R"([{"role":"user","content":"a"},{"role":"assistant","content":"b"}])"), false), "ab");
  try {
    bare.end_of_turn();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("writes nothing after an assistant message"), std::string::npos) << e.what();
  }
  EXPECT_EQ(check_messages(ordered_json::parse(R"([{"role":"user","content":"x"}])")), "");
  EXPECT_EQ(check_messages(ordered_json::parse(R"({"role":"user"})")),
            "\"messages\" must be a list of {role, content}, got a JSON object");
  EXPECT_EQ(check_messages(ordered_json::parse(R"([{"role":"robot","content":"x"}])")),
            "messages[0] has the unknown role \"robot\" (expected system, user, assistant or tool)");
  EXPECT_EQ(check_messages(ordered_json::parse(R"([{"role":"user","content":["x"]}])")),
            "messages[0] (user): \"content\" must be a string, got a JSON array");
  EXPECT_EQ(check_messages(ordered_json::parse(R"([{"role":"user"}])")), "messages[0] (user) has no \"content\"");
}

}  // namespace
}  // namespace titan::data
