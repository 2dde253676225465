#!/usr/bin/env python3
"""A Qwen3-shaped Hugging Face folder with random weights, for measuring the LoRA / QLoRA fine-tunes
(qwen3_4b_lora, and its 8B overrides) on machines without the published checkpoints.

Usage:  python3 tools/make_qwen3_random.py OUT_DIR [--shape 4B|8B|14B] [--tokenizer DIR] [--layers N]

Writes OUT_DIR/config.json (the published architecture of Qwen/Qwen3-<shape>), model-*.safetensors
in bfloat16 (as the published models are: ~8 GB for 4B, ~16 GB for 8B) initialised as Transformers
initialises a new model (linear and embedding weights normal with std = initializer_range, norms
one), with model.safetensors.index.json, and the tokenizer files copied from --tokenizer (default:
the repository's ../shared/assets/qwen3-tokenizer). The weights are drawn and written one tensor at
a time (the model is built on the meta device for its names and shapes), so an 8B folder needs a few
hundred MB of memory, not 16 GB. Seeded: reruns write the same weights.
"""

import argparse
import json
import os
import shutil
import sys

import torch
import transformers
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_env import setup_torch  # noqa: E402

# Published architectures (config.json of Qwen/Qwen3-4B, -8B, -14B).
SHAPES = {
    "4B": dict(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36, num_attention_heads=32,
               num_key_value_heads=8, tie_word_embeddings=True),
    "8B": dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
               num_key_value_heads=8, tie_word_embeddings=False),
    "14B": dict(hidden_size=5120, intermediate_size=17408, num_hidden_layers=40, num_attention_heads=40,
                num_key_value_heads=8, tie_word_embeddings=False),
}
SHARD_BYTES = 5 * 10**9  # save_pretrained's max_shard_size="5GB"


def main() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="4B")
    ap.add_argument("--tokenizer", default=os.path.join(here, "..", "..", "shared", "assets", "qwen3-tokenizer"))
    ap.add_argument("--layers", type=int, default=None)
    args = ap.parse_args()
    setup_torch(2)
    shape = dict(SHAPES[args.shape])
    if args.layers is not None:
        shape["num_hidden_layers"] = args.layers
    config = transformers.Qwen3Config(
        vocab_size=151936, head_dim=128, max_position_embeddings=40960, rope_theta=1000000.0,
        rms_norm_eps=1e-6, attention_bias=False, bos_token_id=151643, eos_token_id=151645,
        torch_dtype="bfloat16", architectures=["Qwen3ForCausalLM"], **shape)
    with torch.device("meta"):
        model = transformers.Qwen3ForCausalLM(config)
    names = [(n, p.shape) for n, p in model.state_dict().items()
             if not (config.tie_word_embeddings and n == "lm_head.weight")]

    os.makedirs(args.out, exist_ok=True)
    gen = torch.Generator().manual_seed(0)
    shards, current, current_bytes = [], {}, 0

    def flush() -> None:
        nonlocal current, current_bytes
        if current:
            shards.append(current)
            save_file(current, os.path.join(args.out, f"part-{len(shards)}.tmp"), metadata={"format": "pt"})
            current, current_bytes = {}, 0

    for name, shp in names:
        if name.endswith("norm.weight"):
            t = torch.ones(shp, dtype=torch.bfloat16)
        else:
            t = torch.empty(shp, dtype=torch.float32).normal_(0.0, config.initializer_range, generator=gen)
            t = t.to(torch.bfloat16)
        nbytes = t.numel() * 2
        if current and current_bytes + nbytes > SHARD_BYTES:
            flush()
        current[name] = t
        current_bytes += nbytes
    flush()

    # Rename to save_pretrained's names once the shard count is known, then write the index.
    weight_map, total = {}, 0
    for i, shard in enumerate(shards, start=1):
        final = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        os.replace(os.path.join(args.out, f"part-{i}.tmp"), os.path.join(args.out, final))
        for name, t in shard.items():
            weight_map[name] = final
            total += t.numel() * 2
    with open(os.path.join(args.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
    config.save_pretrained(args.out)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(args.tokenizer, name), os.path.join(args.out, name))
    print(f"wrote {args.out}: {total / 2 / 1e9:.3f}B parameters in bfloat16, {len(shards)} shards")


if __name__ == "__main__":
    main()
