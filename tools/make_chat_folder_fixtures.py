#!/usr/bin/env python3
"""Writes the chat-template-location fixtures: tokenizer folders whose template sits where
Transformers puts it, and what Transformers renders from each folder as it loads it.

  python3 tools/make_chat_folder_fixtures.py --tokenizer /work/shared/assets/qwen3-tokenizer \
      --llama3-layout tests/fixtures/tokenizer/llama3 --out tests/fixtures/chat/folders

Each folder <out>/<name>/ holds the template files only (tokenizer_config.json, chat_template.jinja,
chat_template.json: small) and, for llama3_v5 alone, its own small tokenizer.json; elsewhere the Qwen3
tokenizer.json from --tokenizer is copied beside them into a temporary folder, which AutoTokenizer.from_pretrained loads, so the precedence between the files is
Transformers' own. <out>/expected.json: per folder, per conversation and add_generation_prompt,
the text of apply_chat_template(messages, tokenize=False) and the ids of tokenize=True.
Expected values come only from Transformers.
"""
import argparse
import json
import os
import shutil
import tempfile

import transformers
from transformers import AutoTokenizer


# Three ChatML variants that differ in one visible tag, so a render shows which file it came from.
def chatml(tag):
    return ("{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n" + tag +
            "' + message['content'] + '<|im_end|>\\n' }}{%- endfor %}"
            "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")


JINJA = chatml("[jinja] ") + "\n"  # a file's trailing newline, as editors write it
JSON = chatml("[json] ")
CONFIG = chatml("[config] ")
TOOL = chatml("[tool_use] ")

BASE_CONFIG = {"tokenizer_class": "Qwen2Tokenizer", "bos_token": None, "eos_token": "<|im_end|>",
               "pad_token": "<|endoftext|>", "model_max_length": 131072}

# name -> files of the folder (a str is written as text, anything else as JSON)
FOLDERS = {
    # Transformers 5 writes chat_template.jinja; the tokenizer_config.json entry loses to it.
    "jinja": {"chat_template.jinja": JINJA, "tokenizer_config.json": dict(BASE_CONFIG, chat_template=CONFIG)},
    # The .jinja file alone, tokenizer_config.json without a template (a v5 save_pretrained).
    "jinja_only": {"chat_template.jinja": JINJA, "tokenizer_config.json": BASE_CONFIG},
    # tokenizer_config.json's list form: the "default" entry.
    "config_list": {"tokenizer_config.json": dict(BASE_CONFIG, chat_template=[
        {"name": "tool_use", "template": TOOL}, {"name": "default", "template": CONFIG}])},
    # The plain string in tokenizer_config.json.
    "config": {"tokenizer_config.json": dict(BASE_CONFIG, chat_template=CONFIG)},
    # A processor's legacy chat_template.json: the tokenizer never reads it, so its own entry wins.
    "json_and_config": {"chat_template.json": {"chat_template": JSON},
                        "tokenizer_config.json": dict(BASE_CONFIG, chat_template=CONFIG)},
    # chat_template.json alone: AutoTokenizer has no template (apply_chat_template raises); a
    # processor would use this file, so the expected text is the tokenizer's render of it.
    "json_only": {"chat_template.json": {"chat_template": JSON}, "tokenizer_config.json": BASE_CONFIG},
}

# A Transformers 5 save of a Llama-3-style instruct folder, as published: its own tokenizer.json
# (tests/fixtures/tokenizer/llama3: byte-level BPE with ignore_merges and a TemplateProcessing that adds
# <|begin_of_text|>, plus the header / end-of-turn tokens added here with HF tokenizers),
# chat_template.jinja, and a tokenizer_config.json without a template.
LLAMA3_TEMPLATE = ("{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + "
                   "'<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}{%- endfor %}"
                   "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{%- endif %}\n")
LLAMA3_CONFIG = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|begin_of_text|>",
                 "eos_token": "<|eot_id|>", "model_max_length": 131072}


def llama3_tokenizer_json(layout_dir):
    from tokenizers import AddedToken, Tokenizer
    tok = Tokenizer.from_file(os.path.join(layout_dir, "tokenizer.json"))
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t in ("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>")])
    return json.loads(tok.to_str())


CONVERSATIONS = [
    [{"role": "user", "content": "What is 2 plus 3?"}, {"role": "assistant", "content": "2 plus 3 is 5."}],
    [{"role": "system", "content": "You add numbers."}, {"role": "user", "content": "1 plus 1?"},
     {"role": "assistant", "content": "2."}, {"role": "user", "content": "And 2 plus 2?"},
     {"role": "assistant", "content": "4."}],
]


def write_folder(path, files):
    os.makedirs(path, exist_ok=True)
    for name, content in files.items():
        with open(os.path.join(path, name), "w", encoding="utf-8") as f:
            if isinstance(content, str):
                f.write(content)
            else:
                json.dump(content, f, indent=2)
                f.write("\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True, help="folder holding the Qwen3 tokenizer.json")
    ap.add_argument("--llama3-layout", required=True, help="tests/fixtures/tokenizer/llama3")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    FOLDERS["llama3_v5"] = {"tokenizer.json": llama3_tokenizer_json(args.llama3_layout),
                            "chat_template.jinja": LLAMA3_TEMPLATE, "tokenizer_config.json": LLAMA3_CONFIG}
    expected = {"transformers": transformers.__version__, "folders": {}}
    for name, files in FOLDERS.items():
        write_folder(os.path.join(args.out, name), files)
        with tempfile.TemporaryDirectory() as tmp:
            write_folder(tmp, files)
            if "tokenizer.json" not in files:  # the Qwen3 vocabulary, not committed again per folder
                shutil.copy(os.path.join(args.tokenizer, "tokenizer.json"), os.path.join(tmp, "tokenizer.json"))
            tok = AutoTokenizer.from_pretrained(tmp)
            kw = {}
            if name == "json_only":
                assert tok.chat_template is None, "the tokenizer now reads chat_template.json: revisit the order"
                kw["chat_template"] = JSON
            cases = []
            for messages in CONVERSATIONS:
                for gen in (False, True):
                    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen, **kw)
                    ids = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=gen, **kw)
                    if isinstance(ids, dict) or hasattr(ids, "keys"):  # v5 returns a BatchEncoding
                        ids = ids["input_ids"]
                    cases.append({"messages": messages, "add_generation_prompt": gen, "text": text,
                                  "ids": [int(i) for i in ids]})
        expected["folders"][name] = cases
    with open(os.path.join(args.out, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
