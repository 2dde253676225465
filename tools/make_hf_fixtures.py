#!/usr/bin/env python3
"""Generate Hugging Face reference fixtures for titan.cpp's dense decoder tests (Qwen3, plus the
Qwen2 / Llama / Mistral layouts that map onto the same decoder).

Usage (from the repository root):

    python3 tools/make_hf_fixtures.py [--out tests/fixtures/hf]

For every case in CASES this writes ``<out>/<case>/``:

  config.json            HF config of a tiny random <Arch>ForCausalLM (see CASES; Qwen3
                         unless the case names another architecture)
  model.safetensors      its float32 weights, as written by save_pretrained()
  tokens.safetensors     input_ids I64 [B, T], labels I64 [B, T] (-100 = ignored)
  expected.safetensors   logits F32 [B, T, V], loss F32 [] (0-dim),
                         grad.<HF parameter name> F32 for every parameter of
                         model.named_parameters() (tied models: only
                         model.embed_tokens.weight, no lm_head.weight)

and ``<out>/README.md`` describing the files, the library versions used and a few
per-case numbers.  At the end it runs tools/make_bf16_fixtures.py on ``<out>``
(expected_bf16_autocast.safetensors per case, and its README section).

How the expected values are computed
------------------------------------
The float32 model is saved, loaded back from disk with attn_implementation="eager",
converted with ``.double()`` and run in float64.  Stock HF modeling code silently
computes a few pieces in float32 even for a float64 model (RMSNorm upcasts to
float32, eager softmax uses dtype=float32, RoPE cos/sin come from float32
inv_freq/positions, and ForCausalLMLoss does ``logits.float()``).  To get a true
float64 reference this script patches, for the reference run only:

  * Qwen3RMSNorm.forward          -> normalises in the input dtype (float64)
  * eager_attention_forward       -> softmax in the query dtype (float64)
  * Qwen3RotaryEmbedding.forward  -> inv_freq = 1/theta^(2i/d) and angles in float64
  * the loss                      -> HF's causal-LM loss semantics re-implemented in
                                     float64: labels padded with -100 on the right
                                     and shifted by one (logit t predicts label t+1),
                                     cross-entropy averaged over non-ignored targets.

Each patched run is cross-checked against the unpatched HF float64 run
(model(input_ids, labels=labels)) and against the plain HF float32 run; the
deviations are written to the README as a guide for test tolerances.

Weights are drawn explicitly from a seeded generator (not HF's initializer) so
re-running reproduces the files bit-for-bit for the same torch version:
matmul / embedding weights ~ N(0, init_std), RMSNorm weights = 1 + 0.1*N(0,1),
biases = 0.05*N(0,1).

The float64 patches are installed into each architecture's modeling module (Qwen3, Qwen2,
Llama and Mistral each carry their own copies of these functions; ARCHS also lists Qwen3Moe so that
tools/make_moe_fixtures.py can reuse exact_fp64 for its modeling module).

Three cases (tied_mha, gqa4_headdim, llama_bias) get their config.json rewritten into the legacy
layout that real Qwen3 checkpoints on the Hub use (top-level "rope_theta",
"rope_scaling": null, "torch_dtype") instead of transformers>=5's
"rope_parameters" block, so the C++ config loader is exercised on both layouts.
The rewritten file is what HF loads for the reference run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from dataclasses import dataclass, field

import numpy as np
import safetensors
import torch
import torch.nn as nn
import transformers
from safetensors.torch import save_file
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)
from transformers.models.llama import modeling_llama
from transformers.models.mistral import modeling_mistral
from transformers.models.qwen2 import modeling_qwen2
from transformers.models.qwen3 import modeling_qwen3 as mq
from transformers.models.qwen3_moe import Qwen3MoeConfig, Qwen3MoeForCausalLM, modeling_qwen3_moe
from torch_env import setup_torch

# arch -> (config class, model class, modeling module, class-name prefix)
ARCHS = {
    "qwen3": (Qwen3Config, Qwen3ForCausalLM, mq, "Qwen3"),
    "qwen2": (Qwen2Config, Qwen2ForCausalLM, modeling_qwen2, "Qwen2"),
    "llama": (LlamaConfig, LlamaForCausalLM, modeling_llama, "Llama"),
    "mistral": (MistralConfig, MistralForCausalLM, modeling_mistral, "Mistral"),
    # used only by tools/make_moe_fixtures.py (exact_fp64("qwen3_moe")); no dense case uses it
    "qwen3_moe": (Qwen3MoeConfig, Qwen3MoeForCausalLM, modeling_qwen3_moe, "Qwen3Moe"),
}

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(REPO_ROOT, "tests", "fixtures", "hf")


@dataclass
class Case:
    name: str
    seed: int
    vocab: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int | None  # None: not passed (the architecture derives hidden / heads)
    intermediate: int
    rope_theta: float
    tied: bool
    attention_bias: bool = False
    arch: str = "qwen3"
    mlp_bias: bool = False  # llama only
    batch: int = 2
    seq: int = 16
    layers: int = 2
    init_std: float = 0.08
    legacy_config: bool = False  # rewrite config.json in Hub-checkpoint (rope_theta) layout
    # label masking: list of (row, start, stop) ranges set to -100
    ignore: list = field(default_factory=list)
    description: str = ""


CASES = [
    Case("tied_mha", seed=1001, vocab=320, hidden=64, heads=4, kv_heads=4, head_dim=16,
         intermediate=128, rope_theta=1e6, tied=True, seq=16, legacy_config=True,
         description="tied embeddings, MHA (GQA ratio 1); legacy config layout; labels = input_ids"),
    Case("untied_gqa2", seed=1002, vocab=301, hidden=64, heads=4, kv_heads=2, head_dim=16,
         intermediate=96, rope_theta=10000.0, tied=False, seq=13,
         ignore=[(1, 10, 11)],
         description="untied lm_head, GQA 2, odd vocab 301, T=13; one ignored label"),
    Case("gqa4_headdim", seed=1003, vocab=384, hidden=48, heads=8, kv_heads=2, head_dim=32,
         intermediate=80, rope_theta=1e6, tied=False, seq=12, legacy_config=True,
         description="untied, GQA 4, head_dim 32 != hidden/heads (6); legacy config layout"),
    Case("attn_bias", seed=1004, vocab=300, hidden=64, heads=4, kv_heads=2, head_dim=16,
         intermediate=96, rope_theta=1e6, tied=True, attention_bias=True, seq=14,
         ignore=[(0, 0, 6), (1, 3, 4), (1, 9, 11)],
         description="q/k/v/o biases, tied, GQA 2; row 0 prompt prefix [0,6) = -100, "
                     "row 1 scattered -100"),
    Case("qwen2_bias", seed=1005, vocab=280, hidden=64, heads=4, kv_heads=2, head_dim=None,
         intermediate=96, rope_theta=1e6, tied=True, arch="qwen2", seq=12, ignore=[(0, 0, 3)],
         description="Qwen2ForCausalLM: q/k/v biases, no o bias, no q/k norm; head_dim derived (16); tied"),
    Case("llama_bias", seed=1006, vocab=310, hidden=64, heads=4, kv_heads=1, head_dim=None,
         intermediate=96, rope_theta=10000.0, tied=False, arch="llama", attention_bias=True, mlp_bias=True,
         seq=11, legacy_config=True,
         description="LlamaForCausalLM: attention_bias (q/k/v/o) and mlp_bias, MQA, untied; legacy layout"),
    Case("mistral_headdim", seed=1007, vocab=256, hidden=48, heads=6, kv_heads=2, head_dim=16,
         intermediate=80, rope_theta=1e6, tied=False, arch="mistral", seq=10, ignore=[(1, 5, 7)],
         description="MistralForCausalLM: no biases, sliding_window null, head_dim 16 != hidden/heads (8)"),
]


# ----------------------------------------------------------------------------------
# float64-faithful patches (reference run only)
# ----------------------------------------------------------------------------------

def _rmsnorm_forward_exact(self, hidden_states):
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))


def _eager_attention_exact(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    key_states = mq.repeat_kv(key, module.num_key_value_groups)
    value_states = mq.repeat_kv(value, module.num_key_value_groups)
    attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling
    if attention_mask is not None:
        attn_weights = attn_weights + attention_mask
    attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=query.dtype)
    attn_output = torch.matmul(attn_weights, value_states)
    return attn_output.transpose(1, 2).contiguous(), attn_weights


def _rotary_forward_exact(self, x, position_ids):
    cfg = self.config
    assert cfg.rope_parameters["rope_type"] == "default"
    base = float(cfg.rope_parameters["rope_theta"])
    dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64, device=x.device) / dim))
    freqs = position_ids[..., None].to(torch.float64) * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class exact_fp64:
    """Context manager that installs the float64-faithful patches."""

    def __init__(self, arch: str = "qwen3"):
        _, _, self.mod, prefix = ARCHS[arch]
        self.norm = getattr(self.mod, prefix + "RMSNorm")
        self.rope = getattr(self.mod, prefix + "RotaryEmbedding")

    def __enter__(self):
        self.saved = (self.norm.forward, self.mod.eager_attention_forward, self.rope.forward)
        self.norm.forward = _rmsnorm_forward_exact
        self.mod.eager_attention_forward = _eager_attention_exact
        self.rope.forward = _rotary_forward_exact
        return self

    def __exit__(self, *exc):
        self.norm.forward, self.mod.eager_attention_forward, self.rope.forward = self.saved
        return False


def causal_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """HF ForCausalLMLoss semantics, in the dtype of `logits` (no float32 upcast)."""
    padded = nn.functional.pad(labels, (0, 1), value=-100)
    shift_labels = padded[..., 1:].contiguous()
    return nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), shift_labels.reshape(-1), ignore_index=-100, reduction="mean"
    )


# ----------------------------------------------------------------------------------

def make_config(c: Case):
    extra = {}
    if c.head_dim is not None:
        extra["head_dim"] = c.head_dim
    if c.arch in ("qwen3", "llama"):
        extra["attention_bias"] = c.attention_bias
    if c.arch == "llama":
        extra["mlp_bias"] = c.mlp_bias
    if c.arch in ("qwen3", "qwen2"):
        extra["use_sliding_window"] = False
    if c.arch == "mistral":
        extra["sliding_window"] = None
    return ARCHS[c.arch][0](
        vocab_size=c.vocab,
        hidden_size=c.hidden,
        intermediate_size=c.intermediate,
        num_hidden_layers=c.layers,
        num_attention_heads=c.heads,
        num_key_value_heads=c.kv_heads,
        hidden_act="silu",
        max_position_embeddings=128,
        initializer_range=c.init_std,
        rms_norm_eps=1e-6,
        use_cache=False,
        tie_word_embeddings=c.tied,
        rope_parameters={"rope_type": "default", "rope_theta": float(c.rope_theta)},
        attention_dropout=0.0,
        **extra,
    )


def init_weights(model: nn.Module, c: Case, gen: torch.Generator) -> None:
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith(".bias"):
                p.copy_(0.05 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(c.init_std * torch.randn(p.shape, generator=gen))


def rewrite_legacy_config(path: str) -> None:
    """Turn a transformers>=5 config.json into the layout of Hub Qwen3 checkpoints."""
    with open(path) as f:
        cfg = json.load(f)
    rope = cfg.pop("rope_parameters")
    assert rope["rope_type"] == "default"
    out = {}
    for k, v in cfg.items():
        if k == "dtype":
            out["torch_dtype"] = v
        else:
            out[k] = v
        if k == "rms_norm_eps":
            out["rope_scaling"] = None
            out["rope_theta"] = rope["rope_theta"]
    out.pop("layer_types", None)
    with open(path, "w") as f:
        json.dump(dict(sorted(out.items())), f, indent=2)
        f.write("\n")


def max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.double() - b.double()).abs().max().item()


def max_rel_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-30)).item()


def build_case(c: Case, out_root: str) -> dict:
    d = os.path.join(out_root, c.name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)

    torch.manual_seed(c.seed)
    gen = torch.Generator().manual_seed(c.seed)
    config = make_config(c)
    model_class = ARCHS[c.arch][1]
    model = model_class(config).float()
    init_weights(model, c, gen)
    model.save_pretrained(d, safe_serialization=True)
    for fn in os.listdir(d):
        if fn not in ("config.json", "model.safetensors"):
            os.remove(os.path.join(d, fn))
    if c.legacy_config:
        rewrite_legacy_config(os.path.join(d, "config.json"))

    # tokens / labels
    input_ids = torch.randint(0, c.vocab, (c.batch, c.seq), generator=gen, dtype=torch.int64)
    labels = input_ids.clone()
    for row, a, b in c.ignore:
        labels[row, a:b] = -100
    save_file({"input_ids": input_ids.contiguous(), "labels": labels.contiguous()},
              os.path.join(d, "tokens.safetensors"))

    # ---- reference: load from disk, float64 ----
    ref = model_class.from_pretrained(d, attn_implementation="eager", dtype=torch.float32)
    # sanity: everything came back from disk
    sd_saved = model.state_dict()
    for k, v in ref.state_dict().items():
        assert torch.equal(v, sd_saved[k]), f"{c.name}: {k} differs after reload"
    assert float(ref.config.rope_parameters["rope_theta"]) == float(c.rope_theta)
    assert ref.config._attn_implementation == "eager"
    assert (ref.lm_head.weight is ref.model.embed_tokens.weight) == c.tied
    ref = ref.double()
    ref.train()  # dropout is 0 anyway

    with exact_fp64(c.arch):
        ref.zero_grad(set_to_none=True)
        logits = ref(input_ids=input_ids).logits
        loss = causal_lm_loss(logits, labels)
        loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in ref.named_parameters()}
    logits = logits.detach()

    expected = {"logits": logits.float().contiguous(), "loss": loss.detach().float().reshape(())}
    for n, g in grads.items():
        expected["grad." + n] = g.float().contiguous()
    save_file(expected, os.path.join(d, "expected.safetensors"))

    # ---- cross-checks (informational) ----
    stats = {"case": c, "max_abs_logit": logits.abs().max().item(), "loss": loss.item(),
             "n_targets": int((nn.functional.pad(labels, (0, 1), value=-100)[..., 1:] != -100).sum()),
             "n_params": sum(p.numel() for p in ref.parameters()),
             "grad_names": list(grads.keys())}

    # (a) unpatched HF float64 path with labels=..., i.e. exactly what HF computes
    ref.zero_grad(set_to_none=True)
    out = ref(input_ids=input_ids, labels=labels)
    out.loss.backward()
    stats["hf64_loss_diff"] = abs(out.loss.item() - loss.item())
    stats["hf64_logit_diff"] = max_abs_diff(out.logits.detach(), logits)
    stats["hf64_grad_rel"] = max(max_rel_diff(p.grad, grads[n]) for n, p in ref.named_parameters())

    # (b) plain HF float32 (what a float32 engine should be close to)
    m32 = model_class.from_pretrained(d, attn_implementation="eager", dtype=torch.float32)
    m32.train()
    out = m32(input_ids=input_ids, labels=labels)
    out.loss.backward()
    stats["hf32_loss_diff"] = abs(out.loss.item() - loss.item())
    stats["hf32_logit_diff"] = max_abs_diff(out.logits.detach(), logits)
    stats["hf32_grad_rel"] = max(max_rel_diff(p.grad, grads[n]) for n, p in m32.named_parameters())

    # loss sanity vs. numpy log-softmax on the stored float32 logits
    lg = logits.numpy()
    tgt = nn.functional.pad(labels, (0, 1), value=-100)[..., 1:].numpy()
    m = lg.max(-1, keepdims=True)
    lse = (m[..., 0] + np.log(np.exp(lg - m).sum(-1)))
    mask = tgt != -100
    nll = lse[mask] - np.take_along_axis(lg, np.where(mask, tgt, 0)[..., None], -1)[..., 0][mask]
    assert abs(nll.mean() - loss.item()) < 1e-9, (nll.mean(), loss.item())

    stats["files"] = {fn: os.path.getsize(os.path.join(d, fn)) for fn in sorted(os.listdir(d))}
    return stats


def write_readme(out_root: str, all_stats: list) -> None:
    total = sum(sum(s["files"].values()) for s in all_stats)
    L = []
    L.append("# Hugging Face reference fixtures (Qwen3 dense; Qwen2 / Llama / Mistral layouts)\n")
    L.append("Generated by `tools/make_hf_fixtures.py`; do not edit by hand. Regenerate with\n")
    L.append("```sh\npython3 tools/make_hf_fixtures.py\n```\n")
    L.append("(from the repository root; needs the packages in `tools/requirements.txt`). "
             "The script is seeded: re-running with the same library versions reproduces the "
             "tensors bit-for-bit.\n")
    L.append("## Versions used\n")
    L.append(f"- python {sys.version.split()[0]}")
    L.append(f"- torch {torch.__version__}")
    L.append(f"- transformers {transformers.__version__}")
    L.append(f"- safetensors {safetensors.__version__}")
    L.append(f"- numpy {np.__version__}\n")
    L.append("## Files in each case directory\n")
    L.append("| file | contents |\n|---|---|")
    L.append("| `config.json` | HF config of a tiny random `Qwen3ForCausalLM` (or the case's architecture; 2 layers, silu, "
             "rms_norm_eps 1e-6, max_position_embeddings 128, use_cache false). |")
    L.append("| `model.safetensors` | float32 weights exactly as written by `save_pretrained(..., "
             "safe_serialization=True)` (HF parameter names; tied models store only "
             "`model.embed_tokens.weight`). |")
    L.append("| `tokens.safetensors` | `input_ids` I64 [B, T]; `labels` I64 [B, T] "
             "(unshifted, = input_ids with some positions set to -100). |")
    L.append("| `expected.safetensors` | `logits` F32 [B, T, V]; `loss` F32 0-dim []; "
             "`grad.<name>` F32 for every `model.named_parameters()` entry (tied: no "
             "`lm_head.weight` gradient, the head's gradient is included in "
             "`grad.model.embed_tokens.weight`). |\n")
    L.append("## Semantics\n")
    L.append("- Loss = HF causal-LM loss: labels are padded with -100 on the right and shifted "
             "left by one, so logit position t is scored against `labels[:, t+1]` and the last "
             "position has no target; cross-entropy is averaged over all non-ignored targets "
             "of the batch (`reduction=\"mean\"`, no `num_items_in_batch`).")
    L.append("- Gradients are of that mean loss.")
    L.append("- Expected values are computed in float64 from the model reloaded from these files "
             "(`attn_implementation=\"eager\"`, `.double()`), with HF's internal float32 "
             "upcasts (RMSNorm, softmax, RoPE, loss) patched to stay in float64, and then "
             "rounded to float32. RoPE: inv_freq = 1/theta^(2i/head_dim) in float64, "
             "rotate-half layout (first half / second half of head_dim), positions 0..T-1.")
    L.append("- Config layout: `tied_mha`, `gqa4_headdim` and `llama_bias` use the layout of real Hub "
             "checkpoints (top-level `rope_theta`, `rope_scaling: null`, `torch_dtype`); "
             "the others use the transformers>=5 layout "
             "(`rope_parameters: {rope_theta, rope_type}`, `dtype`, `layer_types`). A loader "
             "must accept both.\n")
    L.append("## Cases\n")
    L.append("| case | arch | V | hidden | heads | kv | head_dim | inter | rope_theta | tied | bias | B x T | "
             "targets | params | description |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s in all_stats:
        c = s["case"]
        bias = {"qwen2": "q/k/v"}.get(c.arch, "q/k/v/o" if c.attention_bias else "none")
        if c.mlp_bias:
            bias += " + mlp"
        head_dim = c.head_dim if c.head_dim is not None else f"({c.hidden // c.heads})"
        L.append(f"| `{c.name}` | {c.arch} | {c.vocab} | {c.hidden} | {c.heads} | {c.kv_heads} | {head_dim} | "
                 f"{c.intermediate} | {c.rope_theta:g} | {c.tied} | {bias} | "
                 f"{c.batch} x {c.seq} | {s['n_targets']} | {s['n_params']} | {c.description} |")
    L.append("")
    L.append("Label masks (-100): " + "; ".join(
        f"`{s['case'].name}`: " + (", ".join(f"row {r} [{a},{b})" for r, a, b in s["case"].ignore) or "none")
        for s in all_stats) + "\n")
    L.append("## Informational numbers\n")
    L.append("Reference values, and how far stock HF gets from them: `hf64` = unpatched HF in "
             "float64 (`model(input_ids, labels=labels)`), `hf32` = plain HF float32. Grad "
             "column = max over parameters of max|diff| / max|ref grad|. The hf32 column is a "
             "rough guide to what a correct float32 engine can reach.\n")
    L.append("| case | max abs logit | loss | hf64 logit diff | hf64 loss diff | hf64 grad rel | "
             "hf32 logit diff | hf32 loss diff | hf32 grad rel |")
    L.append("|---|---|---|---|---|---|---|---|---|")
    for s in all_stats:
        L.append(f"| `{s['case'].name}` | {s['max_abs_logit']:.6f} | {s['loss']:.9f} | "
                 f"{s['hf64_logit_diff']:.2e} | {s['hf64_loss_diff']:.2e} | {s['hf64_grad_rel']:.2e} | "
                 f"{s['hf32_logit_diff']:.2e} | {s['hf32_loss_diff']:.2e} | {s['hf32_grad_rel']:.2e} |")
    L.append("")
    L.append(f"## Sizes\n\nTotal: {total} bytes ({total / 1024:.1f} KiB).\n")
    L.append("| case | file | bytes |\n|---|---|---|")
    for s in all_stats:
        for fn, sz in s["files"].items():
            L.append(f"| `{s['case'].name}` | `{fn}` | {sz} |")
    L.append("")
    with open(os.path.join(out_root, "README.md"), "w") as f:
        f.write("\n".join(L))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT, help="output root (default: tests/fixtures/hf)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = ap.parse_args()
    setup_torch(args.threads)

    os.makedirs(args.out, exist_ok=True)
    all_stats = []
    for c in CASES:
        s = build_case(c, args.out)
        all_stats.append(s)
        print(f"{c.name:14s} loss={s['loss']:.6f} max|logit|={s['max_abs_logit']:.4f} "
              f"hf32: logit {s['hf32_logit_diff']:.1e} loss {s['hf32_loss_diff']:.1e} "
              f"grad_rel {s['hf32_grad_rel']:.1e}  hf64: logit {s['hf64_logit_diff']:.1e} "
              f"bytes={sum(s['files'].values())}")
    write_readme(args.out, all_stats)
    # The bf16-autocast logits beside the fp32 fixtures (build_case removed the old ones with the case
    # directory; this also re-adds their README section, which write_readme just overwrote).
    import make_bf16_fixtures
    make_bf16_fixtures.run_folder(args.out)
    print(f"wrote {args.out} (torch {torch.__version__}, transformers {transformers.__version__}, "
          f"safetensors {safetensors.__version__})")


if __name__ == "__main__":
    main()
