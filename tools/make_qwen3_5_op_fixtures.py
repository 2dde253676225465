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
<out>/gated_delta_net.safetensors: one Qwen3_5GatedDeltaNet layer (hidden 32, the heads above, conv
kernel 4, eps 1e-6) of seeded random weights, float32, on x F32 [2, 70, 32]: its weights under
Transformers' names (in_proj_qkv.weight, ..., conv1d.weight [96, 1, 4], A_log, dt_bias, norm.weight,
out_proj.weight), x, y, a random dy, and dx plus grad.<name> for every weight (the gradients of <dy, y>).
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


def gated_delta_net(out):
    from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig
    gen = torch.Generator().manual_seed(3)
    config = Qwen3_5TextConfig(hidden_size=32, num_hidden_layers=1, layer_types=["linear_attention"],
                               linear_num_key_heads=HK, linear_key_head_dim=DK, linear_num_value_heads=HV,
                               linear_value_head_dim=DV, linear_conv_kernel_dim=4, rms_norm_eps=1e-6,
                               hidden_act="silu", vocab_size=64, num_attention_heads=2, num_key_value_heads=1,
                               head_dim=16)
    layer = m.Qwen3_5GatedDeltaNet(config, 0).float()
    with torch.no_grad():
        for name, p in layer.named_parameters():
            if name == "A_log":
                p.copy_(torch.log(torch.empty(p.shape).uniform_(0.5, 4.0, generator=gen)))
            elif name in ("dt_bias", "norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * (0.5 if name == "conv1d.weight" else 0.15))
    x = torch.randn(B, T, 32, generator=gen, requires_grad=True)
    y = layer(x)
    dy = torch.randn(y.shape, generator=gen)
    (y * dy).sum().backward()
    tensors = {"x": x.detach(), "y": y.detach().contiguous(), "dy": dy, "dx": x.grad}
    for name, p in layer.named_parameters():
        tensors[name] = p.detach().contiguous()
        tensors["grad." + name] = p.grad.contiguous()
    save_file(tensors, os.path.join(out, "gated_delta_net.safetensors"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    args = p.parse_args()
    setup_torch(1)
    os.makedirs(args.out, exist_ok=True)
    gated_delta(args.out)
    gated_delta_net(args.out)
    causal_conv1d(args.out)


if __name__ == "__main__":
    main()
