#!/usr/bin/env python3
"""Writes tests/fixtures/tokenizer/added_ids.json: the ids HF tokenizers gives added tokens whose
"id" in tokenizer.json collides with another token's, names content already in the vocabulary,
leaves a gap, or repeats a content. tokenizers ignores those ids when it loads the file (its
AddedVocabulary assigns them; a differing id only logs a warning), so titan must give the same.

  python3 tools/make_added_token_fixtures.py --tokenizer tests/fixtures/tokenizer/trained/tokenizer.json \\
      --out tests/fixtures/tokenizer/added_ids.json

Each case: its "added_tokens" (replacing the base file's), a text, and what tokenizers gives:
"ids" (encode without special tokens), "added" (content -> token_to_id), "vocab_size" and
"decoded" (decode of ids). Expected values come only from HF tokenizers.
"""
import argparse
import json

import tokenizers
from tokenizers import Tokenizer


def token(content, id, special=True):
    return {"id": id, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": special}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    base = json.load(open(args.tokenizer, encoding="utf-8"))
    n = len(base["model"]["vocab"])
    eot = base["added_tokens"][0]["content"]
    in_vocab = sorted(base["model"]["vocab"].items(), key=lambda kv: kv[1])[300][0]
    cases = {
        "collides_with_a_vocab_id": [token(eot, 3)],
        "content_in_the_vocabulary": [token(eot, n), token(in_vocab, n + 1, special=False)],
        "leaves_a_gap": [token(eot, n + 77)],
        "out_of_order": [token("<b>", n + 5000), token(eot, 7), token("<c>", 2)],
        "repeated_content": [token(eot, n), token("<b>", n + 1), token(eot, n + 2, special=False)],
        "consistent": [token(eot, n), token("<b>", n + 1)],
    }
    text = f"To be{eot}, or <b>not<c> to be{in_vocab}: that is the question."
    out = []
    for name, added in cases.items():
        spec = dict(base, added_tokens=added)
        tok = Tokenizer.from_str(json.dumps(spec))
        ids = tok.encode(text, add_special_tokens=False).ids
        out.append({"name": name, "added_tokens": added, "text": text, "ids": ids,
                    "added": {t["content"]: tok.token_to_id(t["content"]) for t in added},
                    "vocab_size": tok.get_vocab_size(), "decoded": tok.decode(ids, skip_special_tokens=False)})
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"tokenizers": tokenizers.__version__, "cases": out}, f, ensure_ascii=True, indent=1)
        f.write("\n")
    print(f"{len(out)} cases, tokenizers {tokenizers.__version__}")


if __name__ == "__main__":
    main()
