#!/usr/bin/env python3
"""LoRA adapter fixtures made by Hugging Face PEFT, for titan's adapter import (`titan forward
--adapter`) and its PEFT export.

Usage (from the repository root):

    python3 tools/make_lora_fixtures.py [--out tests/fixtures/lora] [--only CASE,...]

For each case it loads a tiny base model from the HF fixtures (tests/fixtures/hf*/<case>, float32),
wraps it with ``peft.get_peft_model(base, LoraConfig(r, lora_alpha, target_modules, lora_dropout=0))``,
fills every lora_B with seeded random values (PEFT starts B at zero, which would make the adapter
invisible), and writes into <out>/<name>/:

  adapter/            ``PeftModel.save_pretrained``: adapter_config.json + adapter_model.safetensors
  expected.safetensors
    input_ids  I64 [B, T]   the base case's tokens
    logits     F32 [B, T, V]  the PeftModel's logits (float64 run, rounded), eval mode, no grad
    merged.<HF name> F32    ``merge_and_unload()``'s weight for every adapted module

The base weights are read from the HF fixture folder named in README.md (not copied).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys

import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_env import setup_torch  # noqa: E402

CASES = [
    # name, base folder, r, alpha, target_modules
    ("dense_all_linear", "tests/fixtures/hf/untied_gqa2", 4, 8.0,
     ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]),
    ("dense_qv_bias", "tests/fixtures/hf/attn_bias", 2, 5.0, ["q_proj", "v_proj"]),
    ("moe_attention", "tests/fixtures/hf_moe/e8_top2_norm", 3, 3.0, ["q_proj", "k_proj", "v_proj", "o_proj"]),
    # Qwen3.5: PEFT's own "all-linear" (every nn.Linear but the head: the gated DeltaNet's in_proj_* and
    # out_proj, the gated attention's, the MLPs'; on the MoE model the shared expert and its gate).
    ("qwen3_5_all_linear", "tests/fixtures/hf_qwen3_5/text", 4, 8.0, "all-linear"),
    ("qwen3_5_moe_all_linear", "tests/fixtures/hf_qwen3_5/moe", 2, 4.0, "all-linear"),
    # PEFT's target_parameters on Transformers' fused experts (ParamWrapper), beside two projections.
    ("moe_experts", "tests/fixtures/hf_moe/e8_top2_norm", 2, 4.0, ["q_proj", "v_proj"],
     ["mlp.experts.gate_up_proj", "mlp.experts.down_proj"]),
]

# Token ids for a base folder without tokens.safetensors (the Qwen3.5 folders keep theirs in the
# family's expected file).
TOKENS = {
    "tests/fixtures/hf_qwen3_5/text": "tests/fixtures/hf_qwen3_5/expected.safetensors",
    "tests/fixtures/hf_qwen3_5/moe": "tests/fixtures/hf_qwen3_5/expected_moe.safetensors",
}


def run_case(name: str, base_dir: str, r: int, alpha: float, targets: list[str], target_parameters=None,
             out: str = "") -> dict:
    import peft
    import transformers

    kwargs = {"dtype": torch.float64}
    cfg = json.load(open(os.path.join(base_dir, "config.json")))
    if "Moe" in cfg["architectures"][0]:
        kwargs["experts_implementation"] = "eager"
    base = transformers.AutoModelForCausalLM.from_pretrained(base_dir, attn_implementation="eager", **kwargs)
    base.eval()
    config = peft.LoraConfig(r=r, lora_alpha=alpha, target_modules=targets, lora_dropout=0.0,
                             task_type="CAUSAL_LM", bias="none", target_parameters=target_parameters)
    model = peft.get_peft_model(base, config)
    gen = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.1)
    case_dir = os.path.join(out, name)
    os.makedirs(case_dir, exist_ok=True)
    # Saved in float32, as a user's adapter is (the float64 run only sharpens the expected logits).
    model_f32 = model.to(torch.float32)
    model_f32.save_pretrained(os.path.join(case_dir, "adapter"))
    os.remove(os.path.join(case_dir, "adapter", "README.md"))  # PEFT's model-card template
    model = model_f32.to(torch.float64)
    tokens = load_file(TOKENS.get(base_dir, os.path.join(base_dir, "tokens.safetensors")))
    ids = tokens["input_ids"].to(torch.int64)
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    expected = {"input_ids": ids, "logits": logits.to(torch.float32).contiguous()}
    adapted = json.load(open(os.path.join(case_dir, "adapter", "adapter_config.json")))["target_modules"]
    merged = model.merge_and_unload()
    for n, p in merged.named_parameters():
        if any(n.endswith("." + t + ".weight") for t in adapted):
            expected["merged." + n] = p.detach().to(torch.float32).contiguous()
    save_file(expected, os.path.join(case_dir, "expected.safetensors"))
    return {"name": name, "base": base_dir, "r": r, "alpha": alpha,
            "targets": (targets if isinstance(targets, str) else ",".join(targets)) +
                       (" + target_parameters " + ",".join(target_parameters) if target_parameters else ""),
            "merged": sum(1 for k in expected if k.startswith("merged."))}


# name, the case whose adapter it reuses, base folder, adapter_config.json fields replaced: a user's
# edited config over a file with more tensors than it selects. PEFT adapts what the config selects
# and ignores the other tensors; expected.safetensors holds PeftModel.from_pretrained's logits.
PATCHED = [
    ("dense_all_linear_layer1", "dense_all_linear", "tests/fixtures/hf/untied_gqa2", {"layers_to_transform": [1]}),
    ("dense_all_linear_q_only", "dense_all_linear", "tests/fixtures/hf/untied_gqa2",
     {"target_modules": ["q_proj", "no_such_proj"]}),
]


def run_patched(name: str, source: str, base_dir: str, patch: dict, out: str) -> None:
    import peft
    import shutil
    import transformers

    case_dir = os.path.join(out, name)
    shutil.rmtree(case_dir, ignore_errors=True)
    shutil.copytree(os.path.join(out, source, "adapter"), os.path.join(case_dir, "adapter"))
    config_path = os.path.join(case_dir, "adapter", "adapter_config.json")
    config = json.load(open(config_path))
    config.update(patch)
    with open(config_path, "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    base = transformers.AutoModelForCausalLM.from_pretrained(base_dir, attn_implementation="eager",
                                                             dtype=torch.float64)
    model = peft.PeftModel.from_pretrained(base, os.path.join(case_dir, "adapter")).to(torch.float64)
    model.eval()
    ids = load_file(os.path.join(base_dir, "tokens.safetensors"))["input_ids"].to(torch.int64)
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    adapted = sorted({n.split(".lora_A")[0] for n, _ in model.named_parameters() if ".lora_A" in n})
    print(name, len(adapted), "modules adapted")
    save_file({"input_ids": ids, "logits": logits.to(torch.float32).contiguous()},
              os.path.join(case_dir, "expected.safetensors"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/fixtures/lora")
    ap.add_argument("--only", default="", help="comma-separated case names to (re)make; the others are kept")
    args = ap.parse_args()
    setup_torch(1)
    import peft
    import transformers
    only = set(filter(None, args.only.split(",")))
    rows = []
    for case in CASES:
        name, base_dir, r, alpha, targets = case[:5]
        params = case[5] if len(case) > 5 else None
        if not only or name in only:
            rows.append(run_case(name, base_dir, r, alpha, targets, params, args.out))
            continue
        kept = load_file(os.path.join(args.out, name, "expected.safetensors"))
        rows.append({"name": name, "base": base_dir, "r": r, "alpha": alpha,
                     "targets": (targets if isinstance(targets, str) else ",".join(targets)) +
                                (" + target_parameters " + ",".join(params) if params else ""),
                     "merged": sum(1 for k in kept if k.startswith("merged."))})
    for name, source, base_dir, patch in PATCHED:
        if not only or name in only:
            run_patched(name, source, base_dir, patch, args.out)
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write("# LoRA adapter fixtures (made by Hugging Face PEFT)\n\n")
        f.write("Made by `python3 tools/make_lora_fixtures.py` with torch %s, transformers %s, peft %s on %s.\n\n"
                % (torch.__version__, transformers.__version__, peft.__version__, platform.processor() or platform.machine()))
        f.write("| case | base model | r | lora_alpha | target_modules | merged weights |\n|---|---|---|---|---|---|\n")
        for row in rows:
            f.write("| %s | %s | %d | %g | %s | %d |\n" % (row["name"], row["base"], row["r"], row["alpha"],
                                                       row["targets"], row["merged"]))
        f.write("\nEdited configs over an earlier case's adapter file (PEFT adapts what they select and ignores the "
                "other tensors; expected.safetensors: PeftModel.from_pretrained's logits):\n\n")
        for name, source, _, patch in PATCHED:
            f.write("- %s: %s's adapter with %s\n" % (name, source, json.dumps(patch)))
    print("wrote", len(rows), "cases to", args.out)


if __name__ == "__main__":
    main()
