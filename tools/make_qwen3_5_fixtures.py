#!/usr/bin/env python3
"""Writes the Qwen3.5 model fixtures: tiny seeded random folders as Transformers saves them, in
both published layouts, and what Transformers computes on them.

  python3 tools/make_qwen3_5_fixtures.py --out tests/fixtures/hf_qwen3_5

Shape (both folders share the language model's weights): vocab 128, hidden 32, 4 layers of
layer_types [linear, linear, linear, full], full attention 4 heads / 2 kv heads of head_dim 16
with partial_rotary_factor 0.25 (4 rotated lanes) and its output gate, gated DeltaNet 2 key heads x
8, 4 value heads x 8, conv kernel 4, dense MLP 64, untied head, rms_norm_eps 1e-6.
<out>/text/: Qwen3_5ForCausalLM.save_pretrained (config.json with model_type qwen3_5_text,
  model.safetensors with model.layers.* / model.embed_tokens / model.norm / lm_head names).
<out>/multimodal/: Qwen3_5ForConditionalGeneration.save_pretrained with a tiny vision tower
  (config.json with text_config / vision_config; model.language_model.*, model.visual.*, lm_head).
<out>/expected.safetensors (text folder, eager attention, computed in float64: the model in double, and
  Transformers' own linear-attention functions run with float64 where they cast to float32 (its
  torch_chunk_gated_delta_rule and gated norm name torch.float32; they see float64 through
  `float64_module`); Qwen3_5RMSNorm's own .float() stays float32, a relative 1e-7):
  input_ids I64 [2, 70] (past one delta-rule chunk of 64, not a multiple of it), labels I64 [2, 70]
  (the last 5 of row 1 are -100), logits F32 [2, 70, 128], loss F32 [] (HF's shifted mean
  cross-entropy), grad.<HF name> F32 for every parameter (the gradient of that loss).
<out>/expected_multimodal.safetensors: logits F32 [2, 70, 128] of the multimodal folder on the
  same input_ids (text only).
<out>/train/: a Qwen3_5ForCausalLM of the same shape with Transformers' own initialization
  (torch.manual_seed(5): normal(0, 0.02) projections, zero norms, its A_log / dt_bias), the start of:
<out>/training.safetensors: 20 steps of a torch training loop over that model, computed in float64
  as expected.safetensors is (Transformers' own forward, loss and backward; torch.nn.utils.clip_grad_norm_(1.0, foreach=False);
  torch.optim.AdamW(betas (0.9, 0.95), eps 1e-8, weight_decay 0.1, foreach=False), lr set per step):
  input_ids I64 [20, 2, 33] (row b of step s: (3 + b) t + s mod 3, mod 128, a pattern the model
  learns; labels = input_ids), lr F32 [20] (1e-3 after 5 warmup steps), loss F32 [20] (before each step's
  update), grad_norm F32 [20] (before clipping); the lr titan applies is that F32 value.
<out>/moe/ and <out>/moe_multimodal/: the same for Qwen3.5 MoE (Qwen3_5MoeForCausalLM and
  Qwen3_5MoeForConditionalGeneration): 3 layers [linear, linear, full], every MLP a mixture of 4
  experts of width 16, top-2 (renormalised), a shared expert of width 24 with its sigmoid gate,
  output_router_logits true (the aux loss, coefficient 0.01, in the loss);
<out>/expected_moe.safetensors: input_ids / labels as expected.safetensors', logits, loss, aux_loss,
  grad.<HF checkpoint name> (the fused expert gradients split per expert as the checkpoint stores
  them: mlp.experts.<e>.gate_proj / up_proj / down_proj), in float64 as above;
<out>/expected_moe_multimodal.safetensors: the multimodal MoE folder's logits.
<out>/expected_bf16_autocast.safetensors, <out>/expected_moe_bf16_autocast.safetensors: logits F32 and
  loss F32 of the text and MoE folders' float32 models under torch.autocast("cpu", bfloat16) (eager
  attention, no grad), as the hf fixtures' bf16 files are made (tests/fixtures/hf/README.md).
Expected values come only from Transformers.
"""
import argparse
import os
import shutil

import torch
from safetensors.torch import save_file
from transformers import (Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration, Qwen3_5MoeForCausalLM,
                          Qwen3_5MoeForConditionalGeneration)
from transformers.models.qwen3_5_moe.configuration_qwen3_5_moe import Qwen3_5MoeConfig, Qwen3_5MoeTextConfig
from transformers.models.qwen3_5.configuration_qwen3_5 import (Qwen3_5Config, Qwen3_5TextConfig,
                                                               Qwen3_5VisionConfig)

from torch_env import setup_torch

TEXT = dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, tie_word_embeddings=False,
            layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
            linear_num_key_heads=2, linear_key_head_dim=8, linear_num_value_heads=4, linear_value_head_dim=8,
            linear_conv_kernel_dim=4, max_position_embeddings=256, hidden_act="silu",
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25,
                             "mrope_section": [1, 1, 0], "mrope_interleaved": True})
MOE = dict(TEXT, num_hidden_layers=3, layer_types=["linear_attention", "linear_attention", "full_attention"],
           num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, shared_expert_intermediate_size=24,
           output_router_logits=True, router_aux_loss_coef=0.01)
del MOE["intermediate_size"]
VISION = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=32, patch_size=4,
              temporal_patch_size=2, spatial_merge_size=2, in_channels=3, num_position_embeddings=16)


class _Float64Torch:
    """torch, except that torch.float32 is torch.float64 (for the functions of one module)."""

    def __getattr__(self, name):
        return torch.float64 if name in ("float32", "float") else getattr(torch, name)


def float64_module(module):
    """Runs `module`'s functions with float64 where they name torch.float32."""
    module.torch = _Float64Torch()


def randomize(model, seed):
    """Every parameter from its own seeded stream (the norms around their neutral value)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("A_log"):
                p.copy_(torch.log(torch.empty(p.shape).uniform_(1.0, 16.0, generator=gen)))
            elif name.endswith("dt_bias") or name.endswith("linear_attn.norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith("norm.weight"):  # zero-centred: x * (1 + w)
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))


def train(out_dir, path):
    """20 AdamW steps from a freshly initialized model saved to out_dir, in float64 (the caller has
    patched the module's float32 casts). Transformers' initialization keeps this run well
    conditioned: its float32 and float64 losses agree to 1e-7 (the folder's larger random weights
    do not: there a float32 run drifts from float64 by 1e-5 .. 1e-2 over 20 steps)."""
    torch.manual_seed(5)
    model = Qwen3_5ForCausalLM(Qwen3_5TextConfig(**TEXT)).float()
    model.config._attn_implementation = "eager"
    model.save_pretrained(out_dir)
    model = model.double().train()
    batches = torch.stack([torch.stack([(torch.arange(33) * (3 + b) + s % 3) % 128 for b in range(2)])
                           for s in range(20)])
    lrs = [float(torch.tensor(1e-3 * min(1.0, (step + 1) / 5), dtype=torch.float32)) for step in range(20)]
    opt = torch.optim.AdamW(model.parameters(), lr=lrs[0], betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1,
                            foreach=False)
    losses, norms = [], []
    for step in range(20):
        ids = batches[step]
        opt.zero_grad()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=False).item())
        for group in opt.param_groups:
            group["lr"] = lrs[step]
        opt.step()
        losses.append(loss.item())
    save_file({"input_ids": batches, "lr": torch.tensor(lrs, dtype=torch.float32),
               "loss": torch.tensor(losses, dtype=torch.float32), "grad_norm": torch.tensor(norms, dtype=torch.float32)},
              path)


def bf16_autocast(model, ids, labels, path):
    """logits and loss of the float32 `model` under bf16 autocast."""
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(input_ids=ids, labels=labels)
    save_file({"logits": out.logits.float().contiguous(), "loss": out.loss.float().reshape(())}, path)


def checkpoint_grads(model):
    """grad.<name> as the checkpoint names the tensors: fused expert gradients split per expert."""
    out = {}
    for name, param in model.named_parameters():
        if param.grad is None:
            continue  # not part of the forward (a multimodal model's vision tower)
        g = param.grad.float()
        if name.endswith("mlp.experts.gate_up_proj"):
            f = g.shape[1] // 2
            for e in range(g.shape[0]):
                base = name[: -len("gate_up_proj")] + f"{e}."
                out["grad." + base + "gate_proj.weight"] = g[e, :f].contiguous()
                out["grad." + base + "up_proj.weight"] = g[e, f:].contiguous()
        elif name.endswith("mlp.experts.down_proj"):
            for e in range(g.shape[0]):
                out["grad." + name[: -len("down_proj")] + f"{e}.down_proj.weight"] = g[e].contiguous()
        else:
            out["grad." + name] = g.contiguous()
    return out


def moe_fixtures(out_dir, ids, labels):
    """The MoE folders and what Transformers computes on them (the text one in float64)."""
    from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe
    for sub in ("moe", "moe_multimodal"):
        shutil.rmtree(os.path.join(out_dir, sub), ignore_errors=True)
    model = Qwen3_5MoeForCausalLM(Qwen3_5MoeTextConfig(**MOE)).float().eval()
    model.config._attn_implementation = "eager"
    model.config._experts_implementation = "eager"  # the per-expert loop (grouped_mm has no float64)
    randomize(model, 6)
    model.save_pretrained(os.path.join(out_dir, "moe"))
    original_torch = modeling_qwen3_5_moe.torch
    float64_module(modeling_qwen3_5_moe)
    model64 = model.double()
    out = model64(input_ids=ids, labels=labels)
    out.loss.backward()
    expected = {"input_ids": ids, "labels": labels, "logits": out.logits.detach().float().contiguous(),
                "loss": out.loss.detach().float().reshape(()), "aux_loss": out.aux_loss.detach().float().reshape(())}
    expected.update(checkpoint_grads(model64))
    save_file(expected, os.path.join(out_dir, "expected_moe.safetensors"))
    modeling_qwen3_5_moe.torch = original_torch
    model = model64.float()
    bf16_autocast(model, ids, labels, os.path.join(out_dir, "expected_moe_bf16_autocast.safetensors"))

    mm = Qwen3_5MoeForConditionalGeneration(Qwen3_5MoeConfig(text_config=MOE, vision_config=VISION,
                                                             tie_word_embeddings=False)).float().eval()
    mm.config._attn_implementation = "eager"
    mm.config.text_config._attn_implementation = "eager"
    mm.config.text_config._experts_implementation = "eager"
    randomize(mm, 7)
    with torch.no_grad():
        state = model.state_dict()
        for name, param in mm.named_parameters():
            if name.startswith("model.language_model."):
                param.copy_(state["model." + name[len("model.language_model."):]])
            elif name == "lm_head.weight":
                param.copy_(state["lm_head.weight"])
    mm.save_pretrained(os.path.join(out_dir, "moe_multimodal"))
    with torch.no_grad():
        logits = mm(input_ids=ids).logits
    save_file({"logits": logits.contiguous()}, os.path.join(out_dir, "expected_moe_multimodal.safetensors"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    args = p.parse_args()
    setup_torch(1)
    for sub in ("text", "multimodal", "train"):
        shutil.rmtree(os.path.join(args.out, sub), ignore_errors=True)
    os.makedirs(args.out, exist_ok=True)

    text = Qwen3_5ForCausalLM(Qwen3_5TextConfig(**TEXT)).float().eval()
    text.config._attn_implementation = "eager"
    randomize(text, 1)
    text.save_pretrained(os.path.join(args.out, "text"))

    gen = torch.Generator().manual_seed(2)
    ids = torch.randint(0, 128, (2, 70), generator=gen)
    labels = ids.clone()
    labels[1, -5:] = -100
    from transformers.models.qwen3_5 import modeling_qwen3_5
    original_torch = modeling_qwen3_5.torch
    float64_module(modeling_qwen3_5)
    text64 = text.double()
    out = text64(input_ids=ids, labels=labels)
    out.loss.backward()
    expected = {"input_ids": ids, "labels": labels, "logits": out.logits.detach().float().contiguous(),
                "loss": out.loss.detach().float().reshape(())}
    for name, param in text64.named_parameters():
        expected["grad." + name] = param.grad.float().contiguous()
    save_file(expected, os.path.join(args.out, "expected.safetensors"))
    train(os.path.join(args.out, "train"), os.path.join(args.out, "training.safetensors"))
    modeling_qwen3_5.torch = original_torch
    text = text64.float()
    bf16_autocast(text, ids, labels, os.path.join(args.out, "expected_bf16_autocast.safetensors"))

    mm_config = Qwen3_5Config(text_config=TEXT, vision_config=VISION, tie_word_embeddings=False)
    mm = Qwen3_5ForConditionalGeneration(mm_config).float().eval()
    mm.config._attn_implementation = "eager"
    mm.config.text_config._attn_implementation = "eager"
    randomize(mm, 3)
    with torch.no_grad():  # the language model and head of the text folder
        state = text.state_dict()
        for name, param in mm.named_parameters():
            if name.startswith("model.language_model."):
                param.copy_(state["model." + name[len("model.language_model."):]])
            elif name == "lm_head.weight":
                param.copy_(state["lm_head.weight"])
    mm.save_pretrained(os.path.join(args.out, "multimodal"))
    with torch.no_grad():
        mm_logits = mm(input_ids=ids).logits
    save_file({"logits": mm_logits.contiguous()}, os.path.join(args.out, "expected_multimodal.safetensors"))
    moe_fixtures(args.out, ids, labels)


if __name__ == "__main__":
    main()
