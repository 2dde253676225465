#!/usr/bin/env python3
"""A Qwen3-4B-shaped Hugging Face folder with random weights, for measuring the 4B LoRA fine-tune
(qwen3_4b_lora) on machines without the published checkpoint.

Usage:  python3 tools/make_qwen3_4b_random.py OUT_DIR [--tokenizer DIR] [--layers N]

Writes OUT_DIR/config.json (Qwen/Qwen3-4B's published architecture: 36 layers, hidden 2560, FFN
9728, 32 query / 8 kv heads of 128, vocabulary 151936, tied embeddings), model-*.safetensors in
bfloat16 (as the published model is; ~8 GB) initialised as Transformers initialises a new model
(normal, std = initializer_range), and the tokenizer files copied from --tokenizer (default: the
repository's ../shared/assets/qwen3-tokenizer). Seeded: reruns write the same weights.
"""

import argparse
import os
import shutil
import sys

import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_env import setup_torch  # noqa: E402


def main() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--tokenizer", default=os.path.join(here, "..", "..", "shared", "assets", "qwen3-tokenizer"))
    ap.add_argument("--layers", type=int, default=36)
    args = ap.parse_args()
    setup_torch(2)
    torch.manual_seed(0)
    config = transformers.Qwen3Config(
        vocab_size=151936, hidden_size=2560, intermediate_size=9728, num_hidden_layers=args.layers,
        num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
        rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True, attention_bias=False,
        bos_token_id=151643, eos_token_id=151645, torch_dtype="bfloat16")
    torch.set_default_dtype(torch.bfloat16)
    model = transformers.Qwen3ForCausalLM(config)
    model.save_pretrained(args.out, max_shard_size="5GB")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(args.tokenizer, name), os.path.join(args.out, name))
    n = sum(p.numel() for p in model.parameters())
    print(f"wrote {args.out}: {n / 1e9:.3f}B parameters in bfloat16")


if __name__ == "__main__":
    main()
