#!/usr/bin/env python3
"""The LoRA dropout fixture: one PEFT LoRA layer (lora_dropout 0.25) in training mode, forward and
backward in float64, with the dropout mask titan draws for the same module and key.

  python3 tools/make_lora_dropout_fixture.py --out tests/fixtures/lora/dropout_module

titan's mask (nn/lora.cpp, ops/dropout, core/rng.h) is a fixed function of (seed, step, micro-batch,
rank, the module's FQN): reimplemented here (splitmix64 counters, FNV-1a of the FQN, boost's
hash_combine), it replaces PEFT's nn.Dropout module in lora_dropout["default"], so PEFT's own
forward (result + lora_B(lora_A(dropout(x))) * scaling) and autograd give the expected values.
Writes expected.safetensors (x, weight, bias, lora_A, lora_B, dy; y, dx, dA, dB; mask, the scaled
keep-mask) and case.json (p, r, alpha, fqn, seed, step, micro, rank).
"""
import argparse
import json
import os

import torch
from peft import LoraConfig, get_peft_model
from safetensors.torch import save_file

M = (1 << 64) - 1
N, IN, OUT, R, ALPHA, P = 6, 20, 9, 3, 6.0, 0.25
KEY = {"seed": 1234, "step": 7, "micro": 1, "rank": 0}
FQN = "proj.weight"


def mix(z):
    z = (z + 0x9E3779B97F4A7C15) & M
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return z ^ (z >> 31)


def titan_keep_mask(n):
    stream = 0xCBF29CE484222325
    for c in FQN.encode():
        stream = ((stream ^ c) * 0x100000001B3) & M
    for v in (KEY["step"], KEY["micro"], KEY["rank"]):
        stream ^= (v + 0x9E3779B97F4A7C15 + ((stream << 6) & M) + (stream >> 2)) & M
    key = mix(KEY["seed"] ^ mix((stream + 0x9E37) & M))
    keep = []
    for e in range(n):
        u = (mix((key + e * 0x9E3779B97F4A7C15) & M) >> 40) * 2.0**-24
        keep.append(1.0 if u >= P else 0.0)
    return torch.tensor(keep, dtype=torch.float64)


class FixedDropout(torch.nn.Module):
    def __init__(self, scaled_mask):
        super().__init__()
        self.scaled_mask = scaled_mask

    def forward(self, x):
        return x * self.scaled_mask


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(IN, OUT, bias=True)

    def forward(self, x):
        return self.proj(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    g = torch.Generator().manual_seed(0)
    base = Tiny().double()
    with torch.no_grad():
        base.proj.weight.copy_(torch.randn(OUT, IN, generator=g, dtype=torch.float64))
        base.proj.bias.copy_(torch.randn(OUT, generator=g, dtype=torch.float64))
    model = get_peft_model(base, LoraConfig(r=R, lora_alpha=ALPHA, lora_dropout=P, target_modules=["proj"]))
    layer = model.base_model.model.proj
    with torch.no_grad():
        layer.lora_A["default"].weight.copy_(torch.randn(R, IN, generator=g, dtype=torch.float64))
        layer.lora_B["default"].weight.copy_(torch.randn(OUT, R, generator=g, dtype=torch.float64))
    scaled = (titan_keep_mask(N * IN) / (1.0 - P)).reshape(N, IN)
    layer.lora_dropout["default"] = FixedDropout(scaled)
    model.train()
    x = torch.randn(N, IN, generator=g, dtype=torch.float64, requires_grad=True)
    dy = torch.randn(N, OUT, generator=g, dtype=torch.float64)
    y = model(x)
    y.backward(dy)
    t = {
        "x": x.detach(), "weight": layer.base_layer.weight.detach(), "bias": layer.base_layer.bias.detach(),
        "lora_A": layer.lora_A["default"].weight.detach(), "lora_B": layer.lora_B["default"].weight.detach(),
        "dy": dy, "y": y.detach(), "dx": x.grad, "dA": layer.lora_A["default"].weight.grad,
        "dB": layer.lora_B["default"].weight.grad, "mask": scaled,
    }
    os.makedirs(args.out, exist_ok=True)
    save_file({k: v.float().contiguous() for k, v in t.items()}, os.path.join(args.out, "expected.safetensors"))
    with open(os.path.join(args.out, "case.json"), "w") as f:
        json.dump({"p": P, "r": R, "alpha": ALPHA, "fqn": "proj", **KEY}, f, indent=1)
    print("kept", int((scaled > 0).sum()), "of", N * IN)


if __name__ == "__main__":
    main()
