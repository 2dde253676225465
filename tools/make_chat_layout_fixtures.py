#!/usr/bin/env python3
"""Writes the chat-layout fixtures: the same conversations as published datasets lay them out
(ShareGPT, Alpaca, OpenAI messages with renamed keys, a custom list), as JSONL and Parquet, each
with the OpenAI messages it maps to and Transformers' rendering of those messages.

  python3 tools/make_chat_layout_fixtures.py --tokenizer /work/shared/assets/qwen3-tokenizer \
      --out tests/fixtures/chat/layouts

The mapping is LLaMA-Factory's (its sharegpt / alpaca converters), written here independently of
titan: ShareGPT tags human -> user, gpt -> assistant, system -> system, function_call -> assistant,
observation -> tool, a top-level "system" first; Alpaca: system, history pairs, then
instruction + "\n" + input (instruction alone when input is empty or null) -> user, output ->
assistant. Files:
  sharegpt.jsonl / sharegpt.parquet  {"conversations": [{"from", "value"}], "system"?}
  alpaca.jsonl / alpaca.parquet      {"instruction", "input", "output", "system"?, "history"?}
  renamed.jsonl                      {"messages": [{"from", "value"}]}   (OpenAI list, ShareGPT keys)
  custom.jsonl                       {"dialog": [{"speaker", "utterance"}]} with speaker bot / person:
      read with chat_messages_field dialog, chat_role_key speaker, chat_content_key utterance,
      chat_role_map bot=assistant,person=user
  expected.json   per file: the mapped messages of each row, apply_chat_template(tokenize=False)'s
                  text and apply_chat_template(tokenize=True)'s ids.
"""
import argparse
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
from transformers import AutoTokenizer

CONVERSATIONS = [
    {"system": "You are terse.", "turns": [("human", "Name a colour."), ("gpt", "Teal.")]},
    {"system": None, "turns": [("human", "Two plus two?"), ("gpt", "Four."), ("human", "And times three?"),
                               ("gpt", "Twelve.")]},
    {"system": None, "turns": [("system", "Answer in French."), ("human", "Hello"), ("gpt", "Bonjour")]},
    {"system": None, "turns": [("human", "Weather in Paris?"),
                               ("function_call", '{"name": "weather", "arguments": {"city": "Paris"}}'),
                               ("observation", '{"temp_c": 14}'), ("gpt", "14 °C and dry.")]},
]
ROLES = {"human": "user", "gpt": "assistant", "system": "system", "function_call": "assistant", "observation": "tool"}

ALPACA = [
    {"instruction": "Translate to German.", "input": "Good morning", "output": "Guten Morgen", "system": None,
     "history": None},
    {"instruction": "Give a prime above 10.", "input": "", "output": "11", "system": "Be brief.", "history": None},
    {"instruction": "Continue the count.", "input": None, "output": "4, 5", "system": None,
     "history": [["Count to three.", "1, 2, 3"]]},
]


def sharegpt_messages(c):
    out = [{"role": "system", "content": c["system"]}] if c["system"] else []
    for i, (tag, value) in enumerate(c["turns"]):
        if i == 0 and tag == "system" and out:
            out = []
        out.append({"role": ROLES[tag], "content": value})
    return out


def alpaca_messages(r):
    out = [{"role": "system", "content": r["system"]}] if r["system"] else []
    for q, a in r["history"] or []:
        out += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
    user = r["instruction"] + ("\n" + r["input"] if r["input"] else "")
    return out + [{"role": "user", "content": user}, {"role": "assistant", "content": r["output"]}]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    tok = AutoTokenizer.from_pretrained(args.tokenizer)
    os.makedirs(args.out, exist_ok=True)

    def write_jsonl(name, rows):
        with open(os.path.join(args.out, name), "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")

    sharegpt = []
    for c in CONVERSATIONS:
        row = {"conversations": [{"from": t, "value": v} for t, v in c["turns"]]}
        if c["system"]:
            row["system"] = c["system"]
        sharegpt.append(row)
    write_jsonl("sharegpt.jsonl", sharegpt)
    pq.write_table(pa.Table.from_pylist([{"conversations": r["conversations"], "system": r.get("system")}
                                         for r in sharegpt]), os.path.join(args.out, "sharegpt.parquet"))
    alpaca = [{k: v for k, v in r.items() if v is not None or k == "input"} for r in ALPACA]
    write_jsonl("alpaca.jsonl", alpaca)
    pq.write_table(pa.Table.from_pylist(ALPACA), os.path.join(args.out, "alpaca.parquet"))
    renamed = [{"messages": [{"from": m["role"], "value": m["content"]} for m in sharegpt_messages(c)]}
               for c in CONVERSATIONS[:3]]
    write_jsonl("renamed.jsonl", renamed)
    custom_roles = {"user": "person", "assistant": "bot", "system": "system"}
    custom = [{"dialog": [{"speaker": custom_roles[m["role"]], "utterance": m["content"]} for m in sharegpt_messages(c)]}
              for c in CONVERSATIONS[:3]]
    write_jsonl("custom.jsonl", custom)

    mapped = {
        "sharegpt": [sharegpt_messages(c) for c in CONVERSATIONS],
        "alpaca": [alpaca_messages(r) for r in ALPACA],
        "renamed": [sharegpt_messages(c) for c in CONVERSATIONS[:3]],
        "custom": [sharegpt_messages(c) for c in CONVERSATIONS[:3]],
    }
    expected = {}
    for name, rows in mapped.items():
        expected[name] = [{"messages": m, "text": tok.apply_chat_template(m, tokenize=False),
                           "ids": list(tok.apply_chat_template(m, tokenize=True, return_dict=False))} for m in rows]
    with open(os.path.join(args.out, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, ensure_ascii=False, indent=1)
    print({k: len(v) for k, v in expected.items()})


if __name__ == "__main__":
    main()
