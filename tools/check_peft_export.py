#!/usr/bin/env python3
"""Check that a PEFT adapter folder titan wrote (lora.save_adapter) loads with Hugging Face PEFT on
top of its base model and gives the logits `titan forward --adapter` gives.

Usage:
    titan forward --model BASE --adapter ADAPTER --tokens T.safetensors --out O.safetensors
    python3 tools/check_peft_export.py BASE ADAPTER T.safetensors O.safetensors [--merged MERGED_HF_DIR]

Loads BASE with transformers (float32), wraps it with ``peft.PeftModel.from_pretrained(base, ADAPTER)``,
runs input_ids from T, and prints the max |PEFT logits - titan logits| (O's "logits"). With
--merged, also loads titan's merged HF export (checkpoint.last_save_in_hf) with plain transformers
and compares its logits with PEFT's. Exits 1 when a difference exceeds 1e-4 x max(1, max |logit|).
"""

import argparse
import sys

import torch
from safetensors.torch import load_file


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("adapter")
    ap.add_argument("tokens")
    ap.add_argument("titan_out")
    ap.add_argument("--merged")
    args = ap.parse_args()
    import peft
    import transformers

    ids = load_file(args.tokens)["input_ids"].to(torch.int64)
    base = transformers.AutoModelForCausalLM.from_pretrained(args.base, dtype=torch.float32)
    model = peft.PeftModel.from_pretrained(base, args.adapter).eval()
    with torch.no_grad():
        want = model(input_ids=ids).logits
    got = load_file(args.titan_out)["logits"]
    bar = 1e-4 * max(1.0, want.abs().max().item())
    err = (got - want).abs().max().item()
    print(f"PEFT {peft.__version__} on {args.base} + {args.adapter}: max |titan - PEFT| logits {err:.3g} (bar {bar:.3g})")
    ok = err <= bar
    if args.merged:
        merged = transformers.AutoModelForCausalLM.from_pretrained(args.merged, dtype=torch.float32).eval()
        with torch.no_grad():
            m = merged(input_ids=ids).logits
        err_m = (m - want).abs().max().item()
        print(f"titan's merged export in transformers vs PEFT: max |diff| logits {err_m:.3g}")
        ok = ok and err_m <= bar
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
