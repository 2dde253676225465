#!/usr/bin/env python3
"""Checks a tokenizer.json written by `titan train-tokenizer` with HF `tokenizers` and writes the
fixtures of tests/unit/data/tokenizer_trainer_test.cpp:

  build/titan train-tokenizer --input /work/shared/assets/text/tinyshakespeare.txt \
      --vocab-size 1024 --out /tmp/trained
  python3 tools/check_trained_tokenizer.py --tokenizer /tmp/trained/tokenizer.json \
      --shared /work/shared --out tests/fixtures/tokenizer

HF must load the file as is; it must have the requested vocabulary size, "<|endoftext|>" as its last
id, and decode every case back to its text after NFC (byte-level BPE is lossless). Then:
  trained/tokenizer.json  the checked file, copied byte for byte (the test retrains and compares);
  trained_cases.jsonl     one {"text", "ids", "decoded"} per line: ids from HF's
                          encode(text, add_special_tokens=False), decoded from
                          decode(ids, skip_special_tokens=False).
The texts are make_tokenizer_fixtures.py's: tinyshakespeare chunks, chunks of the Russian, Japanese
and Chinese background texts, and edge cases (with "<|endoftext|>" as the one added token), up to
600 characters each.
"""
import argparse
import json
import os
import random
import shutil
import sys
import unicodedata

import tokenizers
from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tokenizer_fixtures import background_chunks, edge_cases, shakespeare_chunks  # noqa: E402

SPECIAL = "<|endoftext|>"
MAX_CHARS = 600


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True, help="tokenizer.json from titan train-tokenizer")
    ap.add_argument("--shared", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab-size", type=int, default=1024)
    args = ap.parse_args()

    tok = Tokenizer.from_file(args.tokenizer)
    spec = json.load(open(args.tokenizer, encoding="utf-8"))
    assert tok.get_vocab_size(with_added_tokens=True) == args.vocab_size, tok.get_vocab_size()
    assert tok.token_to_id(SPECIAL) == args.vocab_size - 1, tok.token_to_id(SPECIAL)
    assert [t["content"] for t in spec["added_tokens"]] == [SPECIAL]

    rng = random.Random(1234)
    texts = shakespeare_chunks(os.path.join(args.shared, "assets/text/tinyshakespeare.txt"), rng)
    texts += background_chunks(os.path.join(args.shared, "background"), rng)
    texts += edge_cases(spec["added_tokens"])
    texts = [t for t in texts if len(t) <= MAX_CHARS]  # keeps the committed fixture small

    os.makedirs(os.path.join(args.out, "trained"), exist_ok=True)
    shutil.copyfile(args.tokenizer, os.path.join(args.out, "trained", "tokenizer.json"))
    with open(os.path.join(args.out, "trained_cases.jsonl"), "w", encoding="utf-8") as f:
        for t in texts:
            ids = tok.encode(t, add_special_tokens=False).ids
            dec = tok.decode(ids, skip_special_tokens=False)
            assert dec == unicodedata.normalize("NFC", t), f"HF does not decode {t!r} back: {dec!r}"
            f.write(json.dumps({"text": t, "ids": ids, "decoded": dec}, ensure_ascii=True) + "\n")
    print(f"tokenizers {tokenizers.__version__}: {len(texts)} cases, vocab {args.vocab_size}, "
          f"{len(spec['model']['merges'])} merges")


if __name__ == "__main__":
    main()
