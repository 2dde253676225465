#!/usr/bin/env python3
"""Writes the chat-template fixtures: Transformers' apply_chat_template(..., tokenize=False) on a
fixed set of conversations, for four templates real models ship.

  python3 tools/make_chat_fixtures.py --tokenizer /work/shared/assets/qwen3-tokenizer \
      --out tests/fixtures/chat/chat_templates.json

qwen3: the template in the Qwen3 tokenizer folder's tokenizer_config.json (thinking blocks, tool
branches); its cases also hold HF's token ids (apply_chat_template(..., tokenize=True)).
qwen2_5, llama3_1, chatml: public template texts (Qwen2.5-Instruct's, Llama-3.1-8B-Instruct's, the
plain ChatML one), held below as text; rendered through the same tokenizer object with
chat_template= (the ids of these are not written: they belong to other vocabularies).
Every case: messages, options (add_generation_prompt, enable_thinking where set, extra template
variables), expected text. Expected values come only from Transformers.
"""
import argparse
import json

import transformers
from transformers import AutoTokenizer

# Qwen2.5-Instruct's tokenizer_config.json "chat_template", as JSON (exact text).
QWEN2_5 = json.loads(r'''"{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n    {%- if messages[0]['role'] == 'system' %}\n        {{- messages[0]['content'] }}\n    {%- else %}\n        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}\n    {%- endif %}\n    {{- \"\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>\" }}\n    {%- for tool in tools %}\n        {{- \"\\n\" }}\n        {{- tool | tojson }}\n    {%- endfor %}\n    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, \\\"arguments\\\": <args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n{%- else %}\n    {%- if messages[0]['role'] == 'system' %}\n        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n    {%- else %}\n        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}\n    {%- endif %}\n{%- endif %}\n{%- for message in messages %}\n    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) or (message.role == \"assistant\" and not message.tool_calls) %}\n        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n    {%- elif message.role == \"assistant\" %}\n        {{- '<|im_start|>' + message.role }}\n        {%- if message.content %}\n            {{- '\\n' + message.content }}\n        {%- endif %}\n        {%- for tool_call in message.tool_calls %}\n            {%- if tool_call.function is defined %}\n                {%- set tool_call = tool_call.function %}\n            {%- endif %}\n            {{- '\\n<tool_call>\\n{\"name\": \"' }}\n            {{- tool_call.name }}\n            {{- '\", \"arguments\": ' }}\n            {{- tool_call.arguments | tojson }}\n            {{- '}\\n</tool_call>' }}\n        {%- endfor %}\n        {{- '<|im_end|>\\n' }}\n    {%- elif message.role == \"tool\" %}\n        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != \"tool\") %}\n            {{- '<|im_start|>user' }}\n        {%- endif %}\n        {{- '\\n<tool_response>\\n' }}\n        {{- message.content }}\n        {{- '\\n</tool_response>' }}\n        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n            {{- '<|im_end|>\\n' }}\n        {%- endif %}\n    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}\n"''')

# Llama-3.1-8B-Instruct's chat template (exact text).
LLAMA3_1 = r'''{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message + builtin tools #}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\n\n"}}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions. To call a function, please respond with JSON for a function call." }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{#- Custom tools are passed in a user message with some extra guidance #}
{%- if tools_in_user_message and not tools is none %}
    {#- Extract the first user message so we can plug it in here #}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\n\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- "<|python_tag|>" + tool_call.name + ".call(" }}
            {%- for arg_name, arg_val in tool_call.arguments | items %}
                {{- arg_name + '="' + arg_val + '"' }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- endif %}
                {%- endfor %}
            {{- ")" }}
        {%- else  %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- '{"name": "' + tool_call.name + '", ' }}
            {{- '"parameters": ' }}
            {{- tool_call.arguments | tojson }}
            {{- "}" }}
        {%- endif %}
        {%- if builtin_tools is defined %}
            {#- This means we're in ipython mode #}
            {{- "<|eom_id|>" }}
        {%- else %}
            {{- "<|eot_id|>" }}
        {%- endif %}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
'''

# The plain ChatML template (Transformers' former default).
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

# ChatML with HF's {% generation %} markers around what an assistant turn trains on (content and
# <|im_end|>, not the header nor the newline after): Transformers' return_assistant_tokens_mask
# then gives the mask titan must find without markers.
CHATML_GENERATION = (
    "{% for message in messages %}{% if message['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\n' }}{% generation %}{{ message['content'] + '<|im_end|>' }}{% endgeneration %}"
    "{{ '\n' }}{% else %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

SYS = {"role": "system", "content": "You are a careful assistant."}


def conversations():
    """(name, messages) pairs; every template renders every one."""
    u1 = {"role": "user", "content": "What is 2 + 3?"}
    a1 = {"role": "assistant", "content": "2 + 3 = 5."}
    u2 = {"role": "user", "content": "And times 4?"}
    a2 = {"role": "assistant", "content": "(2 + 3) x 4 = 20."}
    t1 = {"role": "assistant", "content": "<think>\nAdd them: 2 + 3.\n</think>\n\n2 + 3 = 5."}
    t2 = {"role": "assistant", "content": "<think>\nMultiply 5 by 4.\n</think>\n\n20."}
    w_user = {"role": "user", "content": "Weather in Paris?"}
    call = {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}
    w_call = {"role": "assistant", "content": "", "tool_calls": [call]}
    w_two_calls = {"role": "assistant", "content": "<think>\nTwo cities.\n</think>\n\nChecking.", "tool_calls": [
        call, {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Lyon\"}"}}]}
    w_result = {"role": "tool", "content": "{\"temp\": 21, \"sky\": \"clear\"}"}
    w_answer = {"role": "assistant", "content": "It is 21 \u00b0C and clear."}
    return [
        ("single_user", [u1]),
        ("system_user", [SYS, u1]),
        ("one_turn", [u1, a1]),
        ("system_one_turn", [SYS, u1, a1]),
        ("multi_turn", [SYS, u1, a1, u2, a2]),
        ("multi_turn_open", [u1, a1, u2]),
        ("thinking_last", [u1, t1]),
        ("thinking_both", [SYS, u1, t1, u2, t2]),
        ("thinking_earlier_only", [u1, t1, u2, a2]),
        ("unicode", [{"role": "user", "content": "Grüße, 世界! Ça va? 🙂"},
                     {"role": "assistant", "content": "Très bien — 谢谢 🚀\n  indented line\t"}]),
        ("empty_contents", [{"role": "system", "content": ""}, {"role": "user", "content": ""},
                            {"role": "assistant", "content": ""}]),
        ("whitespace", [{"role": "system", "content": "  padded system  \n"},
                        {"role": "user", "content": "\n\nleading newlines"},
                        {"role": "assistant", "content": "\ntrailing\n\n"}]),
        ("system_mid", [u1, a1, {"role": "system", "content": "Be brief."}, u2]),
        ("tool_call", [SYS, w_user, w_call, w_result, w_answer]),
        ("tool_call_no_system", [w_user, w_call, w_result, w_answer]),
        ("two_tool_calls", [w_user, w_two_calls, w_result, w_result, w_answer]),
    ]


TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {
        "type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}]


def option_sets(name, conv_name):
    sets = [{"add_generation_prompt": False}, {"add_generation_prompt": True}]
    if conv_name.startswith("tool") or conv_name.startswith("two_tool"):
        sets = [{"add_generation_prompt": False}, {"add_generation_prompt": False, "variables": {"tools": TOOLS}}]
        if name == "llama3_1":
            sets = [dict(s, variables=dict(s.get("variables", {}), bos_token="<|begin_of_text|>")) for s in sets]
            sets.append({"add_generation_prompt": True, "variables": {
                "bos_token": "<|begin_of_text|>", "tools": TOOLS, "tools_in_user_message": False}})
        return sets
    if name == "qwen3":
        sets.append({"add_generation_prompt": True, "enable_thinking": False})
        sets.append({"add_generation_prompt": False, "enable_thinking": True})
    if name == "llama3_1":
        sets = [dict(s, variables={"bos_token": "<|begin_of_text|>"}) for s in sets]
        sets.append({"add_generation_prompt": True,
                     "variables": {"bos_token": "<|begin_of_text|>", "date_string": "03 Dec 2026"}})
    return sets


# Jinja semantics the templates lean on (scopes, slices, whitespace control, filters, tests), each
# rendered by Transformers' own compiled environment (trim_blocks, lstrip_blocks, HF's tojson).
SNIPPETS = [
    ("{% for x in [1,2,3][::-1] %}{{ x }}{{ ',' if not loop.last }}{% endfor %}", {}),
    ("{{ 'a</think>b'.split('</think>')[-1] }}|{{ ' x\n'.strip() }}|{{ '\nx'.lstrip('\n') }}", {}),
    ("{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", {}),
    ("{% set x = 1 %}{% for i in [5] %}{% set x = i %}{% endfor %}{{ x }}", {}),
    ("{{ y is defined }}{{ none is none }}{{ 'a' is string }}{{ 1 is not string }}", {}),
    ("{{ {'b': [1, 'x', none, true, 1.5]} | tojson }}", {}),
    ("{{ {'a': 1, 'b': [2, {}]} | tojson(indent=2) }}", {}),
    ("  {%- if true %}\n  a\n  {%- endif %}\n", {}),
    ("x\n  {% if true %}\ny\n  {% endif %}\nz\n\n", {}),
    ("a {# note #}\n  {#- trimmed #} b {{- ' c ' -}} d", {}),
    ("{{ 'ab' ~ 1 }}{{ 'x' in 'axb' }}{{ 2 not in [1] }}{{ [1,2]|length - 1 }}{{ 7 // 2 }}{{ 7 % 3 }}", {}),
    ("{{ 'h\u00e9llo'[1] }}{{ 'h\u00e9llo'|length }}{{ 'h\u00e9llo'[1:3] }}{{ 'abc'[::-1] }}", {}),
    ("{{ m.c }}|{{ m['c'] }}|{{ m.d is defined }}|{{ m.get('d', 'z') }}", {"m": {"c": "v"}}),
    ("{{ ['a','b','c'] | reject('equalto', 'b') | join(', ') }}", {}),
    ("{% for k, v in m | items %}{{ k }}={{ v }};{% endfor %}{% for x in [] %}x{% else %}empty{% endfor %}",
     {"m": {"p": 1, "q": "r"}}),
    ("{% if a %}1{% elif b %}2{% else %}3{% endif %}{{ 'yes' if not a and b else 'no' }}", {"a": False, "b": True}),
    ("{{ ' a  b '.split() | join('|') }}{{ 'a,b,,c'.split(',') | length }}{{ none }}{{ true }}{{ 1.0 }}{{ 2.5 * 2 }}",
     {}),
    ("{{ '\u00a0 x\u3000\n'|trim }}|{{ '\u2003a\u00a0b c'.split()|join(',') }}|{{ 'a\u00e9\u00e9'.rstrip('\u00e9') }}", {}),
    ("{{ strftime_now is defined }}{{ raise_exception is defined }}{{ namespace is defined }}{{ nope is defined }}", {}),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True, help="the Qwen3 tokenizer folder")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    transformers.logging.set_verbosity_error()
    tok = AutoTokenizer.from_pretrained(args.tokenizer)
    qwen3 = json.load(open(f"{args.tokenizer}/tokenizer_config.json", encoding="utf-8"))["chat_template"]
    templates = {"qwen3": qwen3, "qwen2_5": QWEN2_5, "llama3_1": LLAMA3_1, "chatml": CHATML,
                 "chatml_generation": CHATML_GENERATION}
    out = {"transformers": transformers.__version__, "templates": {}}
    for name, text in templates.items():
        cases = []
        for conv_name, messages in conversations():
            for opts in option_sets(name, conv_name):
                kwargs = dict(opts.get("variables", {}))
                if "enable_thinking" in opts:
                    kwargs["enable_thinking"] = opts["enable_thinking"]
                agp = opts["add_generation_prompt"]
                try:
                    rendered = tok.apply_chat_template(messages, chat_template=text, tokenize=False,
                                                       add_generation_prompt=agp, **kwargs)
                except Exception as e:  # noqa: BLE001 - the template's raise_exception: titan must raise too
                    cases.append({"name": conv_name, "messages": messages, "options": opts, "error": str(e)})
                    continue
                case = {"name": conv_name, "messages": messages, "options": opts, "text": rendered}
                if name == "chatml_generation" and not agp:
                    enc = tok.apply_chat_template(messages, chat_template=text, tokenize=True, return_dict=True,
                                                  return_assistant_tokens_mask=True, **kwargs)
                    case["ids"] = list(map(int, enc["input_ids"]))
                    case["assistant_mask"] = list(map(int, enc["assistant_masks"]))
                if name == "qwen3":
                    ids = tok.apply_chat_template(messages, chat_template=text, tokenize=True,
                                                  add_generation_prompt=agp, return_dict=False, **kwargs)
                    if isinstance(ids, dict) or hasattr(ids, "keys"):
                        ids = ids["input_ids"]
                    case["ids"] = list(map(int, ids))
                cases.append(case)
        out["templates"][name] = {"template": text, "cases": cases}
    from transformers.utils.chat_template_utils import _compile_jinja_template
    out["snippets"] = []
    for src, variables in SNIPPETS:
        try:
            text = _compile_jinja_template(src).render(**variables)
        except Exception as e:  # noqa: BLE001 - recorded, the C++ test expects an error too
            text = None
        out["snippets"].append({"template": src, "variables": variables, "text": text})
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
