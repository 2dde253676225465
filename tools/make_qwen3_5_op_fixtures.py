#!/usr/bin/env python3
"""Writes the Qwen3.5 op fixtures: Transformers' own linear-attention pieces on seeded random
inputs, with the gradients torch.autograd takes through them.

  python3 tools/make_qwen3_5_op_fixtures.py --out tests/fixtures/qwen3_5_ops

<out>/gated_delta.safetensors: Transformers' torch_chunk_gated_delta_rule (chunk 64,
use_qk_l2norm_in_kernel=True, as Qwen3_5GatedDeltaNet calls it) over B=2, T=70 (past one chunk,
not a multiple of it), 2 key heads x 16, 4 value heads x 8 (two value heads per key head):
  qkv F32 [2, 70, 96]: per token [q (2 x 16) | k (2 x 16) | v (4 x 8)], the module's mixed_qkv order
  g, beta F32 [2, 70, 4]: g = -exp(A_log) * softplus(a + dt_bias), beta = sigmoid(b), as the module makes them
  o F32 [2, 70, 32]; do F32 (a random upstream gradient); dqkv, dg, dbeta: the gradients of <do, o>.
<out>/causal_conv1d.safetensors: Transformers' causal_conv1d_fn (activation "silu", no bias):
  x F32 [2, 70, 24] (channels last, as titan holds it), weight F32 [24, 4], y, dy, dx, dweight.
Expected values come only from Transformers / torch.
"""
import argparse
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers.models.qwen3_5 import modeling_qwen3_5 as m

from torch_env import setup_torch

B, T, HK, DK, HV, DV = 2, 70, 2, 16, 4, 8


def gated_delta(out):
    gen = torch.Generator().manual_seed(1)
    qkv = torch.randn(B, T, 2 * HK * DK + HV * DV, generator=gen)
    a = torch.randn(B, T, HV, generator=gen)
    b = torch.randn(B, T, HV, generator=gen)
    a_log = torch.log(torch.empty(HV).uniform_(0.5, 4.0, generator=gen))
    dt_bias = torch.rand(HV, generator=gen)
    g = (-a_log.exp() * F.softplus(a + dt_bias)).contiguous()
    beta = b.sigmoid().contiguous()
    qkv.requires_grad_(True)
    g.requires_grad_(True)
    beta.requires_grad_(True)
    q, k, v = torch.split(qkv, [HK * DK, HK * DK, HV * DV], dim=-1)
    o, _ = m.torch_chunk_gated_delta_rule(q.reshape(B, T, HK, DK), k.reshape(B, T, HK, DK), v.reshape(B, T, HV, DV),
                                          g=g, beta=beta, use_qk_l2norm_in_kernel=True)
    o = o.reshape(B, T, HV * DV)
    do = torch.randn(o.shape, generator=gen)
    (o * do).sum().backward()
    save_file({"qkv": qkv.detach(), "g": g.detach(), "beta": beta.detach(), "o": o.detach().contiguous(), "do": do,
               "dqkv": qkv.grad, "dg": g.grad, "dbeta": beta.grad}, os.path.join(out, "gated_delta.safetensors"))


def causal_conv1d(out):
    gen = torch.Generator().manual_seed(2)
    C, K = 24, 4
    x = torch.randn(B, T, C, generator=gen, requires_grad=True)
    w = (0.5 * torch.randn(C, K, generator=gen)).requires_grad_(True)
    y = m.causal_conv1d_fn(x.transpose(1, 2), w, None, activation="silu").transpose(1, 2)
    dy = torch.randn(y.shape, generator=gen)
    (y * dy).sum().backward()
    save_file({"x": x.detach(), "weight": w.detach(), "y": y.detach().contiguous(), "dy": dy, "dx": x.grad,
               "dweight": w.grad}, os.path.join(out, "causal_conv1d.safetensors"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    args = p.parse_args()
    setup_torch(1)
    os.makedirs(args.out, exist_ok=True)
    gated_delta(args.out)
    causal_conv1d(args.out)


if __name__ == "__main__":
    main()
