#!/usr/bin/env python3
"""Writes the tokenizer fixtures: HF `tokenizers` ids and decode for a fixed corpus.

  python3 tools/make_tokenizer_fixtures.py \
      --tokenizer /work/shared/assets/qwen3-tokenizer/tokenizer.json \
      --shared /work/shared --out tests/fixtures/tokenizer

qwen3_cases.jsonl: one {"text", "ids", "decoded"} per line, from Qwen3's tokenizer.json as is.
qwen3_variants_cases.jsonl: the same vocabulary with another pre_tokenizer (GPT-2 layout,
Digits) or other added-token flags; each line also names its "variant", and qwen3_variants.json
maps each variant to the top-level tokenizer.json fields that replaced Qwen3's.
Expected values come only from HF tokenizers (encode without special tokens; decode keeping them).
"""
import argparse
import json
import os
import random

import tokenizers
from tokenizers import Tokenizer


def shakespeare_chunks(path, rng):
    text = open(path, encoding="utf-8").read()
    sizes = [1, 2, 5, 17, 64, 100, 257, 512, 1000, 2048, 4000]
    out = []
    for i in range(40):
        n = sizes[i % len(sizes)]
        start = rng.randrange(0, len(text) - n)
        out.append(text[start:start + n])
    return out


def background_chunks(folder, rng):
    out = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".txt"):
            continue
        text = open(os.path.join(folder, name), encoding="utf-8").read()
        out.append(text[:2000])
        for n in (7, 50, 300, 1500):
            start = rng.randrange(0, max(1, len(text) - n))
            out.append(text[start:start + n])
    return out


def edge_cases(added):
    cases = [
        "",
        " ",
        "  ",
        "\n",
        "\r\n",
        "a\r\n\r\nb",
        "line one\r\n  line two\n\n\tindented\t\ttabs\t",
        "trailing spaces   ",
        "   leading spaces",
        "mixed \t \n \r\n  \n end",
        "    \n    \n",
        "1234567890 3.14159 -42 1e10 0x1F 12,345,678.90",
        "99999999999999999999999999999999",
        "DON'T don't Don'T We'Ll we'll WE'LL I'M i'm you'RE they'Ve it'S he'D she'd",
        "'s 's'S 'ſ O'Neil rock'n'roll ''' ' '",
        "emoji 😀 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🇯🇵",
        "cafe\u0301 caf\u00e9 e\u0301\u0301 A\u030a \u212b n\u0303",
        "\u1100\u1161\u11a8 한국어 텍스트",
        "مرحبا بالعالم، هذا نص عربي.",
        "שלום עולם, זה טקסט בעברית.",
        "mixed العربية and English and עברית 123",
        "nul\x00byte\x00\x00end",
        "\x00",
        "ctrl \x01\x02\x07\x08\x0b\x0c\x1b\x7f chars",
        "nel\u0085here \u0085\u0085 x",
        "nbsp\u00a0here \u00a0\u00a0 x\u00a0",
        "ls\u2028here \u2029 ps",
        "ideographic\u3000space\u3000\u3000end\u3000",
        "ogham\u1680space en\u2002em\u2003thin\u2009 nnbsp\u202f mmsp\u205f mvs\u180e zwsp\u200b",
        " \u00a0\n\u3000 \u0085 ",
        # U+180E is not White_Space (Oniguruma's \s) but PCRE2's \s matches it.
        "a!\u180e!b \u180e\u180e c\t\u180e\n .\u180e x \u180e!y z \u180e\u180e!!",
        "tab\tafter\t",
        "Ünïcödé ÀÉÎÕÜ straße ǅ ﬁ ℌ ⅷ ½ ² ٣ ௰",
        "中文，日本語のテキスト、한국어!",
        "<|im_start|",
        "<|im_end",
        "<|im_start|>",
        "<|im_start|><|im_end|>",
        "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
        "<think>\nreasoning\n</think>\n\nanswer",
        "<|endoftext|>text<|endoftext|>",
        " <|endoftext|> ",
        "<<|im_start|>>",
        "<|<|im_end|>|>",
        "<tool_call>{\"name\": \"f\"}</tool_call>",
        "<|im_start|\u0301>",
        "&lt;|im_start|&gt; <| im_start |>",
        "code: def f(x):\n    return x**2  # comment\n\n\nprint(f(3))\n",
        "URL https://example.com/path?q=1&r=2#frag and email a.b@c.de",
        "!!!??? ... --- *** ((( ))) [[[ ]]] {{{ }}}",
        "a" * 300,
        " " * 100 + "x",
        "\n" * 50,
        "ab" * 200,
        "😀" * 40,
    ]
    for tok in added:
        c = tok["content"]
        cases += [c, "x" + c + "y", " " + c + " ", "Hello" + c + "world", c + c, "\n" + c + "\n"]
    return cases


VARIANTS = {
    "gpt2": {"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}},
    "gpt2_prefix_space": {"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                          "use_regex": True}},
    "digits": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}},
    "digits_contiguous": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}},
    # added_tokens flags: filled in by added_token_flags() below.
    "added_token_flags": None,
}

FLAG_TEXTS = [
    "a  <|im_start|>  b\n\n<|im_start|>x",
    "x<|im_end|>   \n y<|im_end|>z <|im_end|>",
    "word<think>x <think> y (<think>) <think>",
    " </think> x </think>\t\n</think>",
    "<tool_call> x<tool_call>y",
    "cafe\u0301x e\u0301x \u00e9x xe\u0301xe\u0301",
]


def added_token_flags(spec):
    added = [dict(t) for t in spec["added_tokens"]]
    by_content = {t["content"]: t for t in added}
    by_content["<|im_start|>"]["lstrip"] = True
    by_content["<|im_end|>"]["rstrip"] = True
    by_content["<think>"]["single_word"] = True
    by_content["</think>"].update(lstrip=True, rstrip=True)
    by_content["<tool_call>"]["normalized"] = True
    # A normalized token whose content NFC changes: HF matches it in its NFC form.
    added.append({"id": len(spec["model"]["vocab"]) + len(added), "content": "e\u0301x", "single_word": False,
                  "lstrip": False, "rstrip": False, "normalized": True, "special": False})
    return {"added_tokens": added}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--shared", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rng = random.Random(1234)
    spec = json.load(open(args.tokenizer, encoding="utf-8"))
    tok = Tokenizer.from_file(args.tokenizer)
    texts = shakespeare_chunks(os.path.join(args.shared, "assets/text/tinyshakespeare.txt"), rng)
    texts += background_chunks(os.path.join(args.shared, "background"), rng)
    texts += edge_cases(spec["added_tokens"])
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "qwen3_cases.jsonl"), "w", encoding="utf-8") as f:
        for t in texts:
            ids = tok.encode(t, add_special_tokens=False).ids
            dec = tok.decode(ids, skip_special_tokens=False)
            f.write(json.dumps({"text": t, "ids": ids, "decoded": dec}, ensure_ascii=True) + "\n")
    variant_texts = [t for t in texts if len(t) <= 400]
    patches = {name: (patch if patch is not None else added_token_flags(spec)) for name, patch in VARIANTS.items()}
    with open(os.path.join(args.out, "qwen3_variants.json"), "w", encoding="utf-8") as f:
        json.dump(patches, f, ensure_ascii=True, indent=1)
        f.write("\n")
    with open(os.path.join(args.out, "qwen3_variants_cases.jsonl"), "w", encoding="utf-8") as f:
        for name, patch in patches.items():
            s = dict(spec)
            s.update(patch)
            vtok = Tokenizer.from_str(json.dumps(s))
            for t in variant_texts + (FLAG_TEXTS if name == "added_token_flags" else []):
                ids = vtok.encode(t, add_special_tokens=False).ids
                dec = vtok.decode(ids, skip_special_tokens=False)
                f.write(json.dumps({"variant": name, "text": t, "ids": ids, "decoded": dec},
                                   ensure_ascii=True) + "\n")
    print(f"tokenizers {tokenizers.__version__}: {len(texts)} cases, "
          f"{len(variant_texts) * len(VARIANTS) + len(FLAG_TEXTS)} variant cases")


if __name__ == "__main__":
    main()
