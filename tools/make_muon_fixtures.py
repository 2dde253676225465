#!/usr/bin/env python3
"""Writes tests/fixtures/muon/: expected values of torch.optim.Muon for titan's Muon (the
newton_schulz op and train/muon.h), from PyTorch and Transformers only.

  python3 tools/make_muon_fixtures.py            (from the repository root; torch >= 2.9)

newton_schulz.safetensors: per case k, g<k> F32 (a seeded normal matrix, or a batch of them) and
  o<k> F32 = torch.optim._muon._zeropower_via_newtonschulz(g, (3.4445, -4.7750, 2.0315), steps,
  1e-7) widened from bf16 (a batch: one call per matrix), steps<k> I64 [] the step count.
train/: a Qwen3ForCausalLM (vocab 128, hidden 32, 2 layers, 4 heads / 2 kv heads of head_dim 16,
  MLP 64, untied head) with Transformers' own initialization (torch.manual_seed(7)), saved by
  save_pretrained in float32.
training.safetensors: 20 steps of a torch loop over that model in float64: Transformers' forward,
  loss and backward; torch.nn.utils.clip_grad_norm_(1.0, foreach=False) over every parameter; then
  torch.optim.Muon(lr, weight_decay 0.1, momentum 0.95, nesterov, adjust_lr_fn "match_rms_adamw")
  over the 2-D weights of model.layers.* and torch.optim.AdamW(betas (0.9, 0.95), eps 1e-8,
  weight_decay 0.1, foreach=False) over the rest (embeddings, head, norms), both at the step's lr:
  input_ids I64 [20, 2, 33] (row b of step s: (3 + b) t + s mod 3, mod 128; labels = input_ids),
  lr F32 [20] (1e-3 after 5 warmup steps; titan applies that F32 value), loss F32 [20] (before each
  step's update), grad_norm F32 [20] (before clipping).
"""
import os

import torch
from safetensors.torch import save_file
from transformers import Qwen3Config, Qwen3ForCausalLM

from torch_env import setup_torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "muon")
COEFFS = (3.4445, -4.7750, 2.0315)
CONFIG = dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, tie_word_embeddings=False,
              max_position_embeddings=128)


def zeropower(g, steps):
    from torch.optim._muon import _zeropower_via_newtonschulz
    return _zeropower_via_newtonschulz(g, COEFFS, steps, 1e-7).float()


def newton_schulz_cases(path):
    gen = torch.Generator().manual_seed(3)
    shapes = [((8, 24), 5), ((40, 16), 5), ((32, 32), 5), ((3, 12, 20), 5), ((24, 8), 2), ((1, 9), 5)]
    out = {}
    for k, (shape, steps) in enumerate(shapes):
        g = torch.randn(shape, generator=gen) * (0.01 if k % 2 else 3.0)
        o = torch.stack([zeropower(m, steps) for m in g.reshape(-1, *shape[-2:])]).reshape(shape)
        out[f"g{k}"], out[f"o{k}"], out[f"steps{k}"] = g, o, torch.tensor(steps)
    save_file(out, path)


def train(out_dir, path):
    torch.manual_seed(7)
    model = Qwen3ForCausalLM(Qwen3Config(**CONFIG)).float()
    model.config._attn_implementation = "eager"
    model.save_pretrained(out_dir)
    model = model.double().train()
    batches = torch.stack([torch.stack([(torch.arange(33) * (3 + b) + s % 3) % 128 for b in range(2)])
                           for s in range(20)])
    lrs = [float(torch.tensor(1e-3 * min(1.0, (step + 1) / 5), dtype=torch.float32)) for step in range(20)]
    hidden = [p for n, p in model.named_parameters() if n.startswith("model.layers.") and p.ndim == 2]
    rest = [p for n, p in model.named_parameters() if not (n.startswith("model.layers.") and p.ndim == 2)]
    muon = torch.optim.Muon(hidden, lr=lrs[0], weight_decay=0.1, momentum=0.95, nesterov=True,
                            adjust_lr_fn="match_rms_adamw")
    adamw = torch.optim.AdamW(rest, lr=lrs[0], betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, foreach=False)
    losses, norms = [], []
    for step in range(20):
        ids = batches[step]
        muon.zero_grad()
        adamw.zero_grad()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=False).item())
        for opt in (muon, adamw):
            for group in opt.param_groups:
                group["lr"] = lrs[step]
            opt.step()
        losses.append(loss.item())
    save_file({"input_ids": batches, "lr": torch.tensor(lrs, dtype=torch.float32),
               "loss": torch.tensor(losses, dtype=torch.float32), "grad_norm": torch.tensor(norms, dtype=torch.float32)},
              path)
    return losses


def main():
    setup_torch(1)
    os.makedirs(OUT, exist_ok=True)
    newton_schulz_cases(os.path.join(OUT, "newton_schulz.safetensors"))
    losses = train(os.path.join(OUT, "train"), os.path.join(OUT, "training.safetensors"))
    print("torch", torch.__version__, "losses", losses[0], "->", losses[-1])


if __name__ == "__main__":
    main()
