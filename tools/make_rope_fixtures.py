#!/usr/bin/env python3
"""Writes the RoPE-scaling fixtures: tiny random LlamaForCausalLM / Qwen3ForCausalLM folders, one
per rope_type, and the logits Transformers computes for a 64-token input whose positions pass the
original context length (32), so every scaling is active.

  python3 tools/make_rope_fixtures.py --out tests/fixtures/hf_rope
  python3 tools/make_rope_fixtures.py --out tests/fixtures/hf_rope --cases llama_llama3_fractional  # one case

<out>/llama.safetensors, <out>/qwen3.safetensors: float32 weights (HF names) of one seeded random
model per architecture (vocab 320, hidden 16, 2 heads of head_dim 16, 1 kv head, 1 layer, tied),
shared by that architecture's cases (a case folder is its config.json plus these weights as
model.safetensors; the tests assemble it).
<out>/tokens.safetensors: input_ids I64 [1, 64].
<out>/<case>/config.json: written here by hand (both spellings: v4 `rope_scaling` + top-level
rope_theta, v5 `rope_parameters`), loaded by Transformers as is.
<out>/<case>/expected.safetensors: logits_slice F32 [1, 64, 24] (logits[..., :24]) and logsumexp
F32 [1, 64] (over the whole vocabulary), from AutoModelForCausalLM.from_pretrained(folder) in
float32, eager attention: Transformers' own RoPE (its float32 inv_freq and cos/sin, its attention
scaling, its dynamic / longrope update for the forward's length).
Expected values come only from Transformers.
"""
import argparse
import json
import os
import shutil
import tempfile

import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

T = 64
SHAPE = dict(vocab_size=320, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
             num_key_value_heads=1, head_dim=16, rms_norm_eps=1e-6, tie_word_embeddings=True, hidden_act="silu")

LONG = [1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0]
SHORT = [1.0, 1.0, 1.05, 1.1, 1.2, 1.3, 1.5, 2.0]

# case -> (architecture, max_position_embeddings, the config.json's RoPE fields)
CASES = {
    "llama_linear": ("llama", 128, {"rope_theta": 10000.0, "rope_scaling": {"type": "linear", "factor": 2.5}}),
    "llama_dynamic": ("llama", 32, {"rope_parameters": {"rope_type": "dynamic", "factor": 3.0, "rope_theta": 10000.0}}),
    "llama_yarn": ("llama", 128, {"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0,
                                                      "original_max_position_embeddings": 32}}),
    "llama_llama3": ("llama", 128, {"rope_theta": 500000.0, "rope_scaling": {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 32}}),
    # A fractional original context: Transformers computes with 20.5 as given (titan once truncated it).
    "llama_llama3_fractional": ("llama", 128, {"rope_theta": 500000.0, "rope_scaling": {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 20.5}}),
    "llama_longrope": ("llama", 128, {"rope_parameters": {"rope_type": "longrope", "rope_theta": 10000.0,
                                                          "long_factor": LONG, "short_factor": SHORT,
                                                          "original_max_position_embeddings": 32}}),
    "qwen3_yarn": ("qwen3", 128, {"rope_parameters": {
        "rope_type": "yarn", "factor": 4.0, "rope_theta": 1000000.0, "original_max_position_embeddings": 32,
        "beta_fast": 16.0, "beta_slow": 2.0, "truncate": False, "mscale": 1.0, "mscale_all_dim": 0.5}}),
}
ARCH = {"llama": (LlamaConfig, LlamaForCausalLM, "LlamaForCausalLM"),
        "qwen3": (Qwen3Config, Qwen3ForCausalLM, "Qwen3ForCausalLM")}


def random_weights(arch):
    """One seeded random model per architecture (default RoPE: the weights do not depend on it)."""
    config_cls, model_cls, _ = ARCH[arch]
    torch.manual_seed(1234)
    model = model_cls(config_cls(**SHAPE, max_position_embeddings=128, dtype="float32"))
    g = torch.Generator().manual_seed(99)
    state = {}
    for name, p in model.state_dict().items():
        if name == "lm_head.weight":
            continue  # tied: save_pretrained stores only the embedding
        if name.endswith("norm.weight"):
            state[name] = (1 + 0.1 * torch.randn(p.shape, generator=g)).float().contiguous()
        else:
            state[name] = (0.5 * torch.randn(p.shape, generator=g)).float().contiguous()
    return state


def config_json(arch, max_pos, rope):
    _, _, arch_name = ARCH[arch]
    j = {"architectures": [arch_name], "model_type": arch, **SHAPE, "max_position_embeddings": max_pos,
         "attention_bias": False, "attention_dropout": 0.0, "torch_dtype": "float32"}
    if arch == "llama":
        j["mlp_bias"] = False
    j.update(rope)
    return j


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/fixtures/hf_rope")
    ap.add_argument("--cases", help="comma-separated: write only these cases, on the committed weights and tokens")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.cases:
        ids = load_file(os.path.join(args.out, "tokens.safetensors"))["input_ids"]
    else:
        ids = torch.randint(0, SHAPE["vocab_size"], (1, T), generator=torch.Generator().manual_seed(7))
        save_file({"input_ids": ids}, os.path.join(args.out, "tokens.safetensors"))
        for arch in ARCH:
            save_file(random_weights(arch), os.path.join(args.out, f"{arch}.safetensors"), metadata={"format": "pt"})
    for case, (arch, max_pos, rope) in CASES.items():
        if args.cases and case not in args.cases.split(","):
            continue
        case_dir = os.path.join(args.out, case)
        os.makedirs(case_dir, exist_ok=True)
        with open(os.path.join(case_dir, "config.json"), "w") as f:
            json.dump(config_json(arch, max_pos, rope), f, indent=2)
            f.write("\n")
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copy(os.path.join(case_dir, "config.json"), os.path.join(tmp, "config.json"))
            shutil.copy(os.path.join(args.out, f"{arch}.safetensors"), os.path.join(tmp, "model.safetensors"))
            model = AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.float32, attn_implementation="eager")
            model.eval()
            rp = model.config.rope_parameters
            assert rp["rope_type"] == (rope.get("rope_parameters") or rope.get("rope_scaling")).get(
                "rope_type", rope.get("rope_scaling", {}).get("type")), (case, rp)
            with torch.no_grad():
                logits = model(input_ids=ids).logits.float()
        save_file({"logits_slice": logits[..., :24].contiguous(), "logsumexp": torch.logsumexp(logits, -1).contiguous()},
                  os.path.join(case_dir, "expected.safetensors"))
        print(case, rp["rope_type"], "attention_scaling", model.model.rotary_emb.attention_scaling)
    print("transformers", transformers.__version__, "torch", torch.__version__)


if __name__ == "__main__":
    main()
