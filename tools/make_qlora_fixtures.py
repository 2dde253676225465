#!/usr/bin/env python3
"""Writes tests/fixtures/lora/dense_all_linear/expected_{nf4,int8}.safetensors: what a LoRA adapter
computes on a quantized base (QLoRA), for `titan forward --adapter --base-quantization`.

  python3 tools/make_qlora_fixtures.py            (from the repository root; needs bitsandbytes, peft)

The base is tests/fixtures/hf/untied_gqa2 (float32). Every linear weight of its blocks
(model.layers.*: q/k/v/o_proj, gate/up/down_proj; not the embedding or lm_head) is quantized by
bitsandbytes (quantize_4bit(blocksize=64, quant_type="nf4"), or int8_vectorwise_quant) and decoded
by its reference dequantization (backends/default _dequantize_4bit_compute, or
int8_vectorwise_dequant) in float32; the PEFT adapter tests/fixtures/lora/dense_all_linear/adapter
is applied to that decoded base with PeftModel.from_pretrained, and the model runs in float64
(eval, no grad) on the case's input_ids:
  input_ids  I64 [B, T]      (tests/fixtures/lora/dense_all_linear/expected.safetensors')
  logits     F32 [B, T, V]   rounded from float64
Dequantize-then-matmul: the reference of a quantized base's forward.
"""
import os
import sys

import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_env import setup_torch  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BASE = os.path.join(ROOT, "tests/fixtures/hf/untied_gqa2")
CASE = os.path.join(ROOT, "tests/fixtures/lora/dense_all_linear")


def decoded(w, kind):
    import bitsandbytes.functional as F
    from bitsandbytes.backends.default.ops import _dequantize_4bit_compute
    w = w.float().contiguous()
    if kind == "nf4":
        q, state = F.quantize_4bit(w, blocksize=64, quant_type="nf4")
        return _dequantize_4bit_compute(q.reshape(-1), state.absmax, state.code, 64, w.shape, torch.float32)
    q, scale, _ = F.int8_vectorwise_quant(w.clone())
    return F.int8_vectorwise_dequant(q, scale).float()


def main():
    setup_torch(1)
    import peft
    from transformers import AutoModelForCausalLM
    ids = load_file(os.path.join(CASE, "expected.safetensors"))["input_ids"]
    for kind in ("nf4", "int8"):
        base = AutoModelForCausalLM.from_pretrained(BASE, dtype=torch.float32, attn_implementation="eager")
        with torch.no_grad():
            for name, module in base.named_modules():
                if name.startswith("model.layers.") and isinstance(module, torch.nn.Linear):
                    module.weight.copy_(decoded(module.weight, kind))
        model = peft.PeftModel.from_pretrained(base, os.path.join(CASE, "adapter")).double().eval()
        with torch.no_grad():
            logits = model(input_ids=ids).logits
        save_file({"input_ids": ids, "logits": logits.float().contiguous()},
                  os.path.join(CASE, f"expected_{kind}.safetensors"))
        print(kind, "max |logit|", logits.abs().max().item())


if __name__ == "__main__":
    main()
