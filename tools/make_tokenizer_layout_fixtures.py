#!/usr/bin/env python3
"""Writes tokenizer fixtures for the tokenizer.json layouts published decoder LMs ship.

  python3 tools/make_tokenizer_layout_fixtures.py \
      --text /work/shared/assets/text/tinyshakespeare.txt --out tests/fixtures/tokenizer
  python3 tools/make_tokenizer_layout_fixtures.py --text ... --out tests/fixtures/tokenizer \
      --add-variant other:no_decoder    # one more variant on the committed folder

Each layout is a small BPE that HF `tokenizers` trains on tinyshakespeare, then written in the
published layout (JSON fields set as the converted models have them):
  llama3/   ByteLevel BPE, Llama 3's Split regex, ignore_merges, TemplateProcessing with
            <|begin_of_text|> (Sequence[ByteLevel, TemplateProcessing] post-processor).
  llama2/   SentencePiece-converted BPE (Llama 2 / Mistral): normalizer Sequence[Prepend("▁"),
            Replace(" ", "▁")], no pre-tokenizer, byte_fallback with <0xNN> tokens, fuse_unk, <unk>,
            decoder Sequence[Replace("▁", " "), ByteFallback, Fuse, Strip(" ", 1, 0)], <s> template.
  other/    a character-level BPE with <unk> under other normalizers / pre-tokenizers / decoders;
            variants.json maps each variant to the top-level fields that replace the base's
            (llama2's Metaspace layouts among them).
Each folder has tokenizer.json, variants.json (maybe {}) and cases.jsonl (variants: texts up to 120
characters): one {"variant", "text",
"ids", "ids_special", "decoded", "decoded_special"} per line, where ids = encode(text,
add_special_tokens=False), ids_special = encode(text, add_special_tokens=True) and decoded* =
decode(ids*, skip_special_tokens=False). Expected values come only from HF tokenizers.
"""
import argparse
import json
import os
import random

import tokenizers
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")

EDGE = [
    "", " ", "  ", "\n", "\n\n\n", "\t", "a\tb\t\tc\t", "\r\n", "a\r\n\r\nb",
    "trailing spaces   ", "   leading spaces", "  both  ", "mixed \t \n \r\n  \n end",
    "1234567890 3.14159 -42 1e10 12,345,678.90", "99999999999999",
    "DON'T don't We'Ll I'M you'RE", "Hello, World! How are you?",
    "caf\u00e9 cafe\u0301 na\u00efve \u00c5ngstr\u00f6m \u212b \ufb01 \u2167 \u00bd \u00b2 \u0130stanbul \u03a3\u03a3",
    "emoji \U0001F600 \U0001F44D\U0001F3FD \u2764\ufe0f",
    "\u4e2d\u6587\uff0c\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3001\ud55c\uad6d\uc5b4!",
    "\u00a0nbsp\u00a0 \u3000ideographic\u3000",
    "ctrl \x01\x07\x1b\x7f chars", "nul\x00byte",
    "under_score snake_case CamelCase x2y3", "!!!??? ... --- (((a))) [b] {c}",
    "\u2581 already \u2581\u2581 meta \u2581x",
    "<s> and </s> and <unk> and <|begin_of_text|>", "<s>", "x</s>y", "<0x41> <0xZZ>",
    "a" * 100, " " * 30 + "x", "ab " * 40,
]

# Variants of the character-level base (other/): the top-level fields replaced.
SPLIT = {"type": "Split", "pattern": {"Regex": r"\s+|[,.;:!?]"}, "behavior": "Isolated", "invert": False}
FUSE = {"type": "Fuse"}
OTHER_VARIANTS = {
    "nfkc_lowercase_whitespace": {
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]},
        "pre_tokenizer": {"type": "Whitespace"}},
    "nfc_whitespace_split": {"normalizer": {"type": "NFC"}, "pre_tokenizer": {"type": "WhitespaceSplit"}},
    "nfd_punctuation_digits": {
        "normalizer": {"type": "NFD"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "WhitespaceSplit"}, {"type": "Punctuation", "behavior": "Isolated"},
            {"type": "Digits", "individual_digits": True}]}},
    "nfkd_punctuation_contiguous": {
        "normalizer": {"type": "NFKD"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Punctuation", "behavior": "Contiguous"}, {"type": "Digits", "individual_digits": False}]}},
    "strip_replace_regex": {
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Strip", "strip_left": True, "strip_right": True},
            {"type": "Replace", "pattern": {"Regex": r"\d+"}, "content": "#"},
            {"type": "Replace", "pattern": {"String": "th"}, "content": "TH"}]},
        "pre_tokenizer": {"type": "Whitespace"}},
    "metaspace_always_split": {
        "normalizer": None,
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
        "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}},
    "metaspace_first_nosplit": {
        "normalizer": None,
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False},
        "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True}},
    "metaspace_never": {
        "normalizer": None,
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never", "split": True},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never", "split": True},
            {"type": "Strip", "content": "x", "start": 0, "stop": 1}]}},
}
for behavior in ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]:
    for invert in (False, True):
        OTHER_VARIANTS[f"split_{behavior.lower()}{'_invert' if invert else ''}"] = {
            "pre_tokenizer": dict(SPLIT, behavior=behavior, invert=invert), "decoder": FUSE}
# "decoder": null: tokenizers joins the token strings with spaces (titan encodes and decodes it too).
OTHER_VARIANTS["no_decoder"] = {"decoder": None}
OTHER_VARIANTS["split_string_merged_with_next"] = {
    "pre_tokenizer": {"type": "Split", "pattern": {"String": "e"}, "behavior": "MergedWithNext", "invert": False},
    "decoder": FUSE}


def texts_for(path, rng):
    text = open(path, encoding="utf-8").read()
    out = []
    for n in [1, 3, 10, 40, 100, 250, 400] * 3:
        start = rng.randrange(0, len(text) - n)
        out.append(text[start:start + n])
    return out + EDGE


def train(path, vocab_size, pre_tokenizer, special, alphabet):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizer
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special, show_progress=False,
                                  initial_alphabet=alphabet)
    tok.train([path], trainer)
    return json.loads(tok.to_str())


def llama3(path):
    spec = train(path, 600, pre_tokenizers.Sequence([
        pre_tokenizers.Split(tokenizers.Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)]),
        ["<|begin_of_text|>", "<|end_of_text|>"], alphabet=pre_tokenizers.ByteLevel.alphabet())
    bos = spec["model"]["vocab"]["<|begin_of_text|>"]
    spec["model"]["ignore_merges"] = True
    spec["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    spec["post_processor"] = {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        {"type": "TemplateProcessing",
         "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
         "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                  {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
         "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [bos],
                                                  "tokens": ["<|begin_of_text|>"]}}}]}
    return spec, {}


def llama2(path):
    byte_tokens = [f"<0x{i:02X}>" for i in range(256)]
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    trainer = trainers.BpeTrainer(vocab_size=800, special_tokens=["<unk>", "<s>", "</s>"] + byte_tokens,
                                  show_progress=False, limit_alphabet=100)
    tok.train([path], trainer)
    spec = json.loads(tok.to_str())
    # As in Llama 2: the byte tokens live in the vocabulary, not among the added tokens.
    spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] not in byte_tokens]
    bos = spec["model"]["vocab"]["<s>"]
    spec["pre_tokenizer"] = None
    spec["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
        {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    spec["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [bos], "tokens": ["<s>"]}}}
    # Mistral / newer Llama conversions: Metaspace instead of the normalizer, and an added token
    # that is normalized; one with an end-of-sequence suffix too.
    variants = {
        "metaspace_first": {
            "normalizer": None,
            "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False}},
        "eos_suffix": {"post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "</s>", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [bos], "tokens": ["<s>"]},
                               "</s>": {"id": "</s>", "ids": [spec["model"]["vocab"]["</s>"]], "tokens": ["</s>"]}}}},
    }
    return spec, variants


def other(path, suffix=False):
    options = {"end_of_word_suffix": "</w>"} if suffix else {"continuing_subword_prefix": "##"}
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=not suffix, **options))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=500, special_tokens=["<unk>", "<s>"], show_progress=False,
                                  limit_alphabet=60, **options)
    tok.train([path], trainer)
    spec = json.loads(tok.to_str())
    # (HF's Strip decoder panics on an empty text with stop > 0, so this one has none.)
    spec["decoder"] = FUSE if not suffix else {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "</w>"}, "content": " "}, FUSE]}
    return spec, (OTHER_VARIANTS if not suffix else {"lowercase": {"normalizer": {"type": "Lowercase"}}})


def variant_cases(spec, variant, patch, texts):
    s = dict(spec)
    s.update(patch)
    tok = Tokenizer.from_str(json.dumps(s))
    for t in texts if variant == "base" else [t for t in texts if len(t) <= 120]:
        ids = tok.encode(t, add_special_tokens=False).ids
        ids_special = tok.encode(t, add_special_tokens=True).ids
        yield json.dumps({"variant": variant, "text": t, "ids": ids, "ids_special": ids_special,
                          "decoded": tok.decode(ids, skip_special_tokens=False),
                          "decoded_special": tok.decode(ids_special, skip_special_tokens=False)},
                         ensure_ascii=True) + "\n"


def add_variant(out, layout, variant, texts):
    """Appends one variant of OTHER_VARIANTS to a committed layout folder, its tokenizer.json as it
    is (the BPE trainer does not give the same vocabulary twice, so a full run rewrites them all)."""
    folder = os.path.join(out, layout)
    spec = json.load(open(os.path.join(folder, "tokenizer.json"), encoding="utf-8"))
    variants = json.load(open(os.path.join(folder, "variants.json"), encoding="utf-8"))
    variants[variant] = OTHER_VARIANTS[variant]
    with open(os.path.join(folder, "variants.json"), "w", encoding="utf-8") as f:
        json.dump(variants, f, ensure_ascii=True, indent=1)
        f.write("\n")
    with open(os.path.join(folder, "cases.jsonl"), "a", encoding="utf-8") as f:
        f.writelines(variant_cases(spec, variant, OTHER_VARIANTS[variant], texts))


def write_layout(out, name, spec, variants, texts):
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(spec, f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(os.path.join(folder, "variants.json"), "w", encoding="utf-8") as f:
        json.dump(variants, f, ensure_ascii=True, indent=1)
        f.write("\n")
    count = 0
    with open(os.path.join(folder, "cases.jsonl"), "w", encoding="utf-8") as f:
        for variant, patch in [("base", {})] + list(variants.items()):
            for line in variant_cases(spec, variant, patch, texts):
                f.write(line)
                count += 1
    print(f"{name}: {len(spec['model']['vocab'])} tokens, {count} cases")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--text", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--add-variant", help="LAYOUT:VARIANT: append one variant to a committed layout folder")
    args = ap.parse_args()
    texts = texts_for(args.text, random.Random(27))
    if args.add_variant:
        add_variant(args.out, *args.add_variant.split(":"), texts)
        print(f"tokenizers {tokenizers.__version__}")
        return
    for name, make in [("llama3", llama3), ("llama2", llama2), ("other", other),
                       ("other_suffix", lambda p: other(p, suffix=True))]:
        spec, variants = make(args.text)
        write_layout(args.out, name, spec, variants, texts)
    print(f"tokenizers {tokenizers.__version__}")


if __name__ == "__main__":
    main()
