#!/usr/bin/env python3
"""Generate Hugging Face reference fixtures for titan.cpp's Qwen3 mixture-of-experts tests
(Qwen3MoeForCausalLM).

Usage (from the repository root):

    python3 tools/make_moe_fixtures.py [--out tests/fixtures/hf_moe]

Same conventions as tools/make_hf_fixtures.py (whose helpers are imported, not copied):
float32 weights drawn from a seeded generator, a float64 reference run with HF's float32
shortcuts patched out, HF's losses re-implemented in float64, and cross-checks against the
plain HF float64 / float32 runs written into the README.

For every case in CASES this writes ``<out>/<case>/``:

  config.json            HF config of a tiny random Qwen3MoeForCausalLM ("num_experts" key, as
                         Hub checkpoints spell it; transformers>=5 would write "num_local_experts")
  model.safetensors      float32 weights in the Hub layout: per-expert
                         model.layers.{i}.mlp.experts.{e}.{gate_proj,up_proj,down_proj}.weight,
                         model.layers.{i}.mlp.gate.weight (router) and the dense names
  tokens.safetensors     input_ids I64 [B, T], labels I64 [B, T] (-100 = ignored)
  expected.safetensors   logits F32 [B, T, V]; loss, ce_loss, aux_loss F32 0-dim;
                         grad.<Hub name> F32 for every parameter (fused expert gradients split
                         per expert; tied models: no lm_head.weight)

and ``<out>/README.md``; then tools/make_bf16_fixtures.py runs on ``<out>`` (expected_bf16_autocast.safetensors
per case, and its README section).

MoE-specific float64 patches (on top of make_hf_fixtures.exact_fp64("qwen3_moe")):

  * Qwen3MoeTopKRouter.forward -> softmax of the router logits in their own dtype (HF: float32)
  * the aux (load-balancing) loss -> re-implemented in float64 (HF accumulates it in float32)

The expert MLPs are run with experts_implementation="eager" (HF's per-expert loop) for the
reference; HF's default on this machine is "grouped_mm", which is cross-checked in float32.

Router near-ties are avoided: for each case consecutive seeds are tried until every sparse
layer and token has a gap >= MIN_MARGIN between the k-th and (k+1)-th largest router logit in the
float64 run (k = num_experts_per_tok; no constraint when k == num_experts).
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
from safetensors import safe_open
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_hf_fixtures as dense  # noqa: E402

from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM  # noqa: E402
from transformers.models.qwen3_moe import modeling_qwen3_moe as mm  # noqa: E402
from torch_env import setup_torch  # noqa: E402

REPO_ROOT = dense.REPO_ROOT
DEFAULT_OUT = os.path.join(REPO_ROOT, "tests", "fixtures", "hf_moe")
MIN_MARGIN = 1e-3
MAX_SEED_TRIES = 200


@dataclass
class MoeCase:
    name: str
    seed: int
    layers: int
    experts: int
    top_k: int
    norm_topk_prob: bool
    output_router_logits: bool
    router_aux_loss_coef: float = 0.001
    mlp_only_layers: list = field(default_factory=list)
    decoder_sparse_step: int = 1
    tied: bool = False
    vocab: int = 128
    hidden: int = 32
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 16
    moe_intermediate: int = 24
    intermediate: int = 48
    rope_theta: float = 1e6
    batch: int = 2
    seq: int = 12
    init_std: float = 0.08  # read by dense.init_weights
    ignore: list = field(default_factory=list)
    description: str = ""

    def sparse_layers(self) -> list:
        return [i for i in range(self.layers)
                if i not in self.mlp_only_layers and self.experts > 0 and (i + 1) % self.decoder_sparse_step == 0]


CASES = [
    MoeCase("e8_top2_norm", seed=2001, layers=2, experts=8, top_k=2, norm_topk_prob=True,
            output_router_logits=False, ignore=[(1, 4, 6)],
            description="2 sparse layers, 8 experts top-2, norm_topk_prob, aux off, untied"),
    MoeCase("e8_top2_nonorm_aux", seed=2101, layers=2, experts=8, top_k=2, norm_topk_prob=False,
            output_router_logits=True, router_aux_loss_coef=0.05, ignore=[(0, 0, 3)],
            description="2 sparse layers, 8 experts top-2, no renormalisation, aux on (coef 0.05), untied"),
    MoeCase("mlp_only_aux", seed=2201, layers=3, experts=8, top_k=2, norm_topk_prob=True,
            output_router_logits=True, router_aux_loss_coef=0.02, mlp_only_layers=[1],
            ignore=[(0, 7, 8), (1, 2, 3)],
            description="3 layers, mlp_only_layers [1] (layer 1 dense MLP), 8 experts top-2, norm, "
                        "aux on (coef 0.02), untied"),
    MoeCase("sparse_step2_tied", seed=2301, layers=4, experts=4, top_k=4, norm_topk_prob=True,
            output_router_logits=False, decoder_sparse_step=2, tied=True, ignore=[(1, 9, 12)],
            description="4 layers, decoder_sparse_step 2 (layers 1, 3 sparse; 0, 2 dense), 4 experts "
                        "top-4 (all), norm, aux off, tied embeddings"),
]


# ----------------------------------------------------------------------------------
# float64-faithful MoE patches (reference run only)
# ----------------------------------------------------------------------------------

def _router_forward_exact(self, hidden_states):
    hidden_states = hidden_states.reshape(-1, self.hidden_dim)
    router_logits = nn.functional.linear(hidden_states, self.weight)
    router_probs = nn.functional.softmax(router_logits, dim=-1)  # HF: dtype=torch.float
    router_top_value, router_indices = torch.topk(router_probs, self.top_k, dim=-1)
    if self.norm_topk_prob:
        router_top_value = router_top_value / router_top_value.sum(dim=-1, keepdim=True)
    return router_logits, router_top_value.to(router_logits.dtype), router_indices


class exact_fp64_moe:
    """dense.exact_fp64 for the qwen3_moe module plus the router softmax patch."""

    def __enter__(self):
        self.base = dense.exact_fp64("qwen3_moe")
        self.base.__enter__()
        self.saved = mm.Qwen3MoeTopKRouter.forward
        mm.Qwen3MoeTopKRouter.forward = _router_forward_exact
        return self

    def __exit__(self, *exc):
        mm.Qwen3MoeTopKRouter.forward = self.saved
        self.base.__exit__(*exc)
        return False


def load_balancing_loss(router_logits: tuple, num_experts: int, top_k: int) -> torch.Tensor:
    """HF load_balancing_loss_func (attention_mask=None) in the dtype of the logits.

    router_logits: one raw-logit tensor [B*T, E] per sparse layer (HF records the router's
    output index 0 = the pre-softmax logits). With p = softmax(logits) per row, over all
    R = n_sparse_layers * B*T rows:  aux = E * sum_e (count_e / R) * (sum_rows p_e / R),
    count_e = number of top-k slots (rows x k) that selected expert e (not differentiable).
    """
    counts = None
    probs = None
    rows = 0
    for lg in router_logits:
        p = nn.functional.softmax(lg, dim=-1)
        sel = torch.topk(p, top_k, dim=-1).indices
        c = nn.functional.one_hot(sel, num_experts).to(p.dtype).sum(dim=(0, 1))
        counts = c if counts is None else counts + c
        probs = p.sum(0) if probs is None else probs + p.sum(0)
        rows += p.shape[0]
    return num_experts * torch.sum((counts / rows) * (probs / rows))


# ----------------------------------------------------------------------------------

def make_config(c: MoeCase) -> Qwen3MoeConfig:
    return Qwen3MoeConfig(
        vocab_size=c.vocab, hidden_size=c.hidden, intermediate_size=c.intermediate,
        moe_intermediate_size=c.moe_intermediate, num_hidden_layers=c.layers,
        num_attention_heads=c.heads, num_key_value_heads=c.kv_heads, head_dim=c.head_dim,
        hidden_act="silu", max_position_embeddings=128, initializer_range=c.init_std, rms_norm_eps=1e-6,
        use_cache=False, tie_word_embeddings=c.tied,
        rope_parameters={"rope_type": "default", "rope_theta": float(c.rope_theta)},
        attention_bias=False, attention_dropout=0.0, use_sliding_window=False,
        decoder_sparse_step=c.decoder_sparse_step, mlp_only_layers=list(c.mlp_only_layers),
        num_experts=c.experts, num_experts_per_tok=c.top_k, norm_topk_prob=c.norm_topk_prob,
        output_router_logits=c.output_router_logits, router_aux_loss_coef=c.router_aux_loss_coef,
    )


def to_hub(named: dict, c: MoeCase) -> dict:
    """In-memory (fused experts) name -> tensor  ==>  Hub per-expert layout."""
    F = c.moe_intermediate
    out = {}
    for n, t in named.items():
        if n.endswith("mlp.experts.gate_up_proj"):  # [E, 2F, D]: rows [0, F) gate, [F, 2F) up
            pre = n[: -len("gate_up_proj")]
            assert t.shape == (c.experts, 2 * F, c.hidden), t.shape
            for e in range(c.experts):
                out[f"{pre}{e}.gate_proj.weight"] = t[e, :F, :].contiguous()
                out[f"{pre}{e}.up_proj.weight"] = t[e, F:, :].contiguous()
        elif n.endswith("mlp.experts.down_proj"):  # [E, D, F]
            pre = n[: -len("down_proj")]
            assert t.shape == (c.experts, c.hidden, F), t.shape
            for e in range(c.experts):
                out[f"{pre}{e}.down_proj.weight"] = t[e].contiguous()
        else:
            out[n] = t.contiguous()
    return out


def make_model_and_tokens(c: MoeCase, seed: int):
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = Qwen3MoeForCausalLM(make_config(c)).float()
    model.set_attn_implementation("eager")  # as the reloaded copies below, so logits compare bit-exactly
    model.set_experts_implementation("eager")
    dense.init_weights(model, c, gen)
    input_ids = torch.randint(0, c.vocab, (c.batch, c.seq), generator=gen, dtype=torch.int64)
    labels = input_ids.clone()
    for row, a, b in c.ignore:
        labels[row, a:b] = -100
    return model, input_ids, labels


def router_margin(router_logits: tuple, k: int) -> float:
    """min over layers/tokens of (k-th largest - (k+1)-th largest) router logit; inf if k == E."""
    m = float("inf")
    for lg in router_logits:
        if k >= lg.shape[-1]:
            continue
        s = torch.sort(lg.detach(), dim=-1, descending=True).values
        m = min(m, (s[:, k - 1] - s[:, k]).min().item())
    return m


def fp64_router_logits(model, input_ids) -> tuple:
    m64 = Qwen3MoeForCausalLM(model.config).double()  # fresh copy; keeps `model` float32
    m64.load_state_dict(model.state_dict())
    m64.set_experts_implementation("eager")
    with torch.no_grad(), exact_fp64_moe():
        return m64(input_ids=input_ids, output_router_logits=True).router_logits


def pick_seed(c: MoeCase):
    best = None
    for j in range(MAX_SEED_TRIES):
        seed = c.seed + j
        model, input_ids, labels = make_model_and_tokens(c, seed)
        margin = router_margin(fp64_router_logits(model, input_ids), c.top_k)
        if best is None or margin > best[1]:
            best = (seed, margin)
        if margin >= MIN_MARGIN:
            return seed, margin, j + 1
    return best[0], best[1], MAX_SEED_TRIES


def rewrite_config(path: str) -> None:
    """Use the Hub spelling "num_experts" (transformers>=5 writes its internal "num_local_experts")."""
    with open(path) as f:
        cfg = json.load(f)
    if "num_local_experts" in cfg:
        cfg["num_experts"] = cfg.pop("num_local_experts")
    with open(path, "w") as f:
        json.dump(dict(sorted(cfg.items())), f, indent=2)
        f.write("\n")


def grads_rel(got: dict, ref: dict) -> float:
    return max(dense.max_rel_diff(got[n], ref[n]) for n in ref)


def build_case(c: MoeCase, out_root: str) -> dict:
    d = os.path.join(out_root, c.name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)

    seed, margin_search, tries = pick_seed(c)
    model, input_ids, labels = make_model_and_tokens(c, seed)

    # ---- files: config.json + Hub-layout model.safetensors + tokens ----
    model.save_pretrained(d, safe_serialization=True)
    sp = load_file(os.path.join(d, "model.safetensors"))  # what save_pretrained wrote (informational)
    for fn in os.listdir(d):
        if fn != "config.json":
            os.remove(os.path.join(d, fn))
    rewrite_config(os.path.join(d, "config.json"))
    hub = to_hub({n: p.detach() for n, p in model.named_parameters()}, c)
    save_file(hub, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    sp_is_hub = sorted(sp) == sorted(hub) and all(torch.equal(sp[k], hub[k]) for k in hub)
    save_file({"input_ids": input_ids.contiguous(), "labels": labels.contiguous()},
              os.path.join(d, "tokens.safetensors"))

    # ---- reload from disk and check it is the same model ----
    ref, info = Qwen3MoeForCausalLM.from_pretrained(d, attn_implementation="eager", experts_implementation="eager",
                                                    dtype=torch.float32, output_loading_info=True)
    for k in ("missing_keys", "unexpected_keys", "mismatched_keys"):
        assert not info.get(k), f"{c.name}: {k} = {info.get(k)}"
    assert ref.config.num_experts == c.experts and ref.config.num_experts_per_tok == c.top_k
    assert ref.config.output_router_logits == c.output_router_logits
    assert (ref.lm_head.weight is ref.model.embed_tokens.weight) == c.tied
    sparse = [i for i, layer in enumerate(ref.model.layers) if isinstance(layer.mlp, mm.Qwen3MoeSparseMoeBlock)]
    assert sparse == c.sparse_layers(), (sparse, c.sparse_layers())
    sd_mem = model.state_dict()
    for k, v in ref.state_dict().items():
        assert torch.equal(v, sd_mem[k]), f"{c.name}: {k} differs after reload"
    with torch.no_grad():
        lg_mem = model(input_ids=input_ids).logits
        lg_disk = ref(input_ids=input_ids).logits
    assert torch.equal(lg_mem, lg_disk), f"{c.name}: logits differ after reload"

    # ---- reference: float64, patched ----
    ref = ref.double()
    ref.train()
    with exact_fp64_moe():
        ref.zero_grad(set_to_none=True)
        out = ref(input_ids=input_ids, output_router_logits=True)  # record router logits (aux on or off)
        logits = out.logits
        router_logits = out.router_logits
        assert len(router_logits) == len(sparse)
        ce = dense.causal_lm_loss(logits, labels)
        aux = load_balancing_loss(router_logits, c.experts, c.top_k)
        loss = ce + c.router_aux_loss_coef * aux if c.output_router_logits else ce
        loss.backward()
    fused_grads = {n: p.grad.detach().clone() for n, p in ref.named_parameters()}
    grads = to_hub(fused_grads, c)
    logits = logits.detach()
    margin = router_margin(router_logits, c.top_k)
    assert margin == margin_search, (margin, margin_search)
    aux_value = aux.detach() if c.output_router_logits else torch.zeros((), dtype=torch.float64)

    expected = {"logits": logits.float().contiguous(), "loss": loss.detach().float().reshape(()),
                "ce_loss": ce.detach().float().reshape(()), "aux_loss": aux_value.float().reshape(())}
    assert sorted(grads) == sorted(hub), "gradient names must match the Hub weight names"
    for n, g in grads.items():
        expected["grad." + n] = g.float().contiguous()
    save_file(expected, os.path.join(d, "expected.safetensors"))

    ref_sel = [torch.topk(lg.detach(), c.top_k, dim=-1).indices.sort(-1).values for lg in router_logits]
    stats = {"case": c, "seed": seed, "tries": tries, "margin": margin, "sparse": sparse,
             "loss": loss.item(), "ce": ce.item(), "aux": aux.item(), "aux_used": c.output_router_logits,
             "max_abs_logit": logits.abs().max().item(), "save_pretrained_is_hub": sp_is_hub,
             "n_targets": int((nn.functional.pad(labels, (0, 1), value=-100)[..., 1:] != -100).sum()),
             "n_params": sum(p.numel() for p in ref.parameters())}

    # HF's own aux function on the float64 reference router logits (float32 accumulation inside)
    stats["hf_auxfn_diff"] = abs(float(mm.load_balancing_loss_func(
        tuple(r.detach() for r in router_logits), c.experts, c.top_k, None)) - aux.item())

    def hf_run(m, tag):
        m.zero_grad(set_to_none=True)
        o = m(input_ids=input_ids, labels=labels, output_router_logits=True)
        # what model(input_ids, labels=labels) returns with the config's output_router_logits:
        hf_loss = o.loss if c.output_router_logits else dense.causal_lm_loss(o.logits.float(), labels)
        if not c.output_router_logits:
            # recompute exactly as HF does with output_router_logits=False (no aux term)
            m.zero_grad(set_to_none=True)
            o = m(input_ids=input_ids, labels=labels)
            hf_loss = o.loss
        hf_loss.backward()
        g = to_hub({n: p.grad for n, p in m.named_parameters()}, c)
        stats[tag + "_loss_diff"] = abs(hf_loss.item() - loss.item())
        stats[tag + "_logit_diff"] = dense.max_abs_diff(o.logits.detach(), logits)
        stats[tag + "_grad_rel"] = grads_rel(g, grads)
        with torch.no_grad():
            rl = m(input_ids=input_ids, output_router_logits=True)
        stats[tag + "_aux_diff"] = abs(float(mm.load_balancing_loss_func(rl.router_logits, c.experts, c.top_k, None))
                                       - aux.item())
        sel = [torch.topk(lg, c.top_k, dim=-1).indices.sort(-1).values for lg in rl.router_logits]
        stats[tag + "_same_routing"] = all(torch.equal(a, b) for a, b in zip(sel, ref_sel))

    # (a) unpatched HF float64 (router softmax / RMSNorm / RoPE / loss / aux partly in float32)
    hf_run(ref, "hf64")
    # (b) plain HF float32, eager experts loop
    hf_run(Qwen3MoeForCausalLM.from_pretrained(d, attn_implementation="eager", experts_implementation="eager",
                                               dtype=torch.float32).train(), "hf32")
    # (c) plain HF float32 with the default experts implementation (grouped_mm when available)
    m32 = Qwen3MoeForCausalLM.from_pretrained(d, attn_implementation="eager", dtype=torch.float32).train()
    stats["default_experts_impl"] = m32.config._experts_implementation
    hf_run(m32, "hf32d")

    stats["files"] = {fn: os.path.getsize(os.path.join(d, fn)) for fn in sorted(os.listdir(d))}
    assert sum(stats["files"].values()) < 1_100_000, stats["files"]
    return stats


def fmt_margin(m: float) -> str:
    return "n/a (k = E)" if m == float("inf") else f"{m:.3e}"


def write_readme(out_root: str, all_stats: list) -> None:
    total = sum(sum(s["files"].values()) for s in all_stats)
    L = []
    L.append("# Hugging Face reference fixtures (Qwen3 mixture-of-experts)\n")
    L.append("Generated by `tools/make_moe_fixtures.py`; do not edit by hand. Regenerate with\n")
    L.append("```sh\npython3 tools/make_moe_fixtures.py\n```\n")
    L.append("(from the repository root; needs the packages in `tools/requirements.txt`; reuses the helpers of "
             "`tools/make_hf_fixtures.py`, see `tests/fixtures/hf/README.md` for the shared conventions). "
             "The script is seeded: re-running with the same library versions reproduces the files "
             "bit-for-bit.\n")
    L.append("## Versions used\n")
    L.append(f"- python {sys.version.split()[0]}")
    L.append(f"- torch {torch.__version__}")
    L.append(f"- transformers {transformers.__version__}")
    L.append(f"- safetensors {safetensors.__version__}")
    L.append(f"- numpy {np.__version__}\n")
    L.append("## Files in each case directory\n")
    L.append("| file | contents |\n|---|---|")
    L.append("| `config.json` | HF config of a tiny random `Qwen3MoeForCausalLM` (`model_type` `qwen3_moe`; "
             "transformers>=5 layout with `rope_parameters`, but the expert count under the Hub key "
             "`num_experts` — transformers 5 itself would write `num_local_experts`; it reads both). |")
    L.append("| `model.safetensors` | float32 weights in the Hub checkpoint layout (see below). |")
    L.append("| `tokens.safetensors` | `input_ids` I64 [B, T]; `labels` I64 [B, T] (unshifted, = input_ids "
             "with some positions set to -100). |")
    L.append("| `expected.safetensors` | `logits` F32 [B, T, V]; `loss`, `ce_loss`, `aux_loss` F32 0-dim; "
             "`grad.<name>` F32 for every weight name of `model.safetensors` (same per-expert names; tied: "
             "no `lm_head.weight`, the head's gradient is inside `grad.model.embed_tokens.weight`). |\n")
    L.append("## Weight layout on disk (Hub layout)\n")
    L.append("- Sparse layer i: router `model.layers.{i}.mlp.gate.weight` [E, D]; per expert e: "
             "`model.layers.{i}.mlp.experts.{e}.gate_proj.weight` [F, D], `...up_proj.weight` [F, D], "
             "`...down_proj.weight` [D, F] (F = moe_intermediate_size).")
    L.append("- Dense-MLP layer i: `model.layers.{i}.mlp.{gate_proj,up_proj}.weight` [I, D], "
             "`model.layers.{i}.mlp.down_proj.weight` [D, I] (I = intermediate_size).")
    L.append("- Everything else as in the dense Qwen3 fixtures (embed_tokens, self_attn q/k/v/o_proj, q_norm, "
             "k_norm, input_layernorm, post_attention_layernorm, model.norm, lm_head unless tied).")
    L.append("- In memory transformers 5 fuses the experts: `mlp.experts.gate_up_proj` [E, 2F, D] "
             "(rows [0, F) = gate_proj, rows [F, 2F) = up_proj; `gate, up = linear(x, W[e]).chunk(2)`) and "
             "`mlp.experts.down_proj` [E, D, F]. `from_pretrained` merges the per-expert tensors "
             "(conversion_mapping `qwen2_moe` entry, used for `qwen3_moe`) and `save_pretrained` splits them "
             "back; this script writes the per-expert file itself and checks that it equals what "
             "`save_pretrained` writes, that `from_pretrained` reports no missing/unexpected/mismatched keys, "
             "and that the reloaded model gives bit-identical float32 logits.\n")
    L.append("## Semantics (transformers " + transformers.__version__ + ", `modeling_qwen3_moe.py`)\n")
    L.append("- Sparse layers: layer i is sparse iff `i not in mlp_only_layers` and `num_experts > 0` and "
             "`(i + 1) % decoder_sparse_step == 0`; the others use a dense SwiGLU MLP of width "
             "`intermediate_size`.")
    L.append("- Sparse block, per token x (the post-attention-RMSNorm output, [D]): router logits "
             "`z = W_gate x` ([E], no bias); `p = softmax(z)` (HF: in float32); top-k of p (k = "
             "`num_experts_per_tok`); if `norm_topk_prob`: `w = p_topk / sum(p_topk)`, else `w = p_topk`; "
             "w cast back to the model dtype; output `sum_j w_j * down_e(silu(gate_e x) * up_e x)` over the "
             "k selected experts e = idx_j. No shared expert, no bias anywhere.")
    L.append("- `ce_loss`: HF causal-LM loss (labels padded with -100 on the right and shifted by one, mean over "
             "non-ignored targets), as in the dense fixtures.")
    L.append("- `aux_loss`: HF `load_balancing_loss_func(router_logits, num_experts, num_experts_per_tok, "
             "attention_mask=None)`. The `router_logits` it receives are the RAW router logits z (the "
             "router's output index 0, recorded per sparse layer by `OutputRecorder(Qwen3MoeTopKRouter, "
             "index=0)`, shape [B*T, E]), NOT probabilities; the function applies the softmax itself. With "
             "R = (number of sparse layers) * B * T rows pooled over all sparse layers, p_r = softmax(z_r), "
             "S_r = top-k indices of p_r:")
    L.append("")
    L.append("  `aux = E * sum_e ( (1/R) * sum_r #{j : S_r[j] = e} ) * ( (1/R) * sum_r p_r[e] )`")
    L.append("")
    L.append("  i.e. E times the dot product of the per-expert fraction of top-k slots (these fractions sum to "
             "k, not 1) and the mean router probability. The count term is not differentiable; gradients "
             "flow only through the mean probabilities. HF accumulates both in float32; the reference "
             "re-implements it in float64. All B*T positions count (no attention mask; ignored labels do "
             "not matter for aux).")
    L.append("- `loss` = what `model(input_ids, labels=labels).loss` means: `ce_loss + router_aux_loss_coef * "
             "aux_loss` when `output_router_logits` is true in the config, else `ce_loss` (then `aux_loss` is "
             "stored as 0). Gradients are of `loss`.")
    L.append("- Expected values come from the model reloaded from these files, converted to float64, with "
             "`attn_implementation=\"eager\"`, `experts_implementation=\"eager\"` (per-expert loop), and HF's "
             "float32 shortcuts patched to float64: RMSNorm, attention softmax, RoPE (via "
             "`make_hf_fixtures.exact_fp64(\"qwen3_moe\")`), the router softmax, the CE loss and the aux "
             "loss. Then rounded to float32.")
    L.append(f"- Router near-ties are avoided: seeds are searched (from the case's base seed, up to "
             f"{MAX_SEED_TRIES}) until, in the float64 run, every sparse layer and token has a gap >= "
             f"{MIN_MARGIN:g} between its k-th and (k+1)-th largest router logit (column `router margin`). "
             "With k = E every expert is always selected and there is no tie to avoid.\n")
    L.append("## Cases\n")
    L.append("Common: vocab 128, hidden 32, 4 heads, 2 kv heads, head_dim 16, moe_intermediate_size 24, "
             "intermediate_size 48, rope_theta 1e6, rms_norm_eps 1e-6, silu, B x T = 2 x 12, weights ~ "
             "N(0, 0.08) (norms 1 + 0.1 N(0,1)).\n")
    L.append("| case | layers | sparse layers | E | k | norm_topk | aux (coef) | tied | seed | targets | params | "
             "description |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s in all_stats:
        c = s["case"]
        aux = f"on ({c.router_aux_loss_coef:g})" if c.output_router_logits else "off"
        L.append(f"| `{c.name}` | {c.layers} | {s['sparse']} | {c.experts} | {c.top_k} | {c.norm_topk_prob} | "
                 f"{aux} | {c.tied} | {s['seed']} | {s['n_targets']} | {s['n_params']} | {c.description} |")
    L.append("")
    L.append("Label masks (-100): " + "; ".join(
        f"`{s['case'].name}`: " + (", ".join(f"row {r} [{a},{b})" for r, a, b in s["case"].ignore) or "none")
        for s in all_stats) + "\n")
    L.append("## Reference numbers\n")
    L.append("`aux (unscaled)` is computed for every case (also where it is not part of the loss, where the file "
             "stores `aux_loss` = 0).\n")
    L.append("| case | loss | ce_loss | aux (unscaled) | aux in loss | router margin | max abs logit |")
    L.append("|---|---|---|---|---|---|---|")
    for s in all_stats:
        L.append(f"| `{s['case'].name}` | {s['loss']:.9f} | {s['ce']:.9f} | {s['aux']:.9f} | {s['aux_used']} | "
                 f"{fmt_margin(s['margin'])} | {s['max_abs_logit']:.6f} |")
    L.append("")
    L.append("## Deviations of stock HF from the reference\n")
    L.append("`hf64` = unpatched HF in float64 (router softmax, RMSNorm, RoPE, CE and aux partly in float32), "
             "`hf32` = plain HF float32 with the eager experts loop, `hf32d` = plain HF float32 with the "
             "default experts implementation (`" + all_stats[0]["default_experts_impl"] + "` here). Loss = "
             "`model(input_ids, labels=labels).loss`. Grad = max over parameters of max|diff| / max|ref grad|. "
             "aux = HF's `load_balancing_loss_func` on that run's router logits vs the float64 reference aux. "
             "`routing` = same top-k expert sets as the reference for every token and layer. `hf aux fn` = "
             "HF's aux function applied to the float64 reference router logits (its float32 accumulation).\n")
    L.append("| case | run | logit diff | loss diff | grad rel | aux diff | routing |")
    L.append("|---|---|---|---|---|---|---|")
    for s in all_stats:
        for tag in ("hf64", "hf32", "hf32d"):
            L.append(f"| `{s['case'].name}` | {tag} | {s[tag + '_logit_diff']:.2e} | {s[tag + '_loss_diff']:.2e} | "
                     f"{s[tag + '_grad_rel']:.2e} | {s[tag + '_aux_diff']:.2e} | "
                     f"{'same' if s[tag + '_same_routing'] else 'DIFFERENT'} |")
    L.append("")
    L.append("HF aux function on the float64 router logits vs the float64 aux: " + "; ".join(
        f"`{s['case'].name}` {s['hf_auxfn_diff']:.2e}" for s in all_stats) + ".\n")
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
    ap.add_argument("--out", default=DEFAULT_OUT, help="output root (default: tests/fixtures/hf_moe)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = ap.parse_args()
    setup_torch(args.threads)

    os.makedirs(args.out, exist_ok=True)
    all_stats = []
    for c in CASES:
        s = build_case(c, args.out)
        all_stats.append(s)
        print(f"{c.name:20s} seed={s['seed']} (tries {s['tries']}) loss={s['loss']:.6f} ce={s['ce']:.6f} "
              f"aux={s['aux']:.6f} margin={fmt_margin(s['margin'])} "
              f"hf32: logit {s['hf32_logit_diff']:.1e} loss {s['hf32_loss_diff']:.1e} grad {s['hf32_grad_rel']:.1e} "
              f"hf64: logit {s['hf64_logit_diff']:.1e} save_pretrained==hub {s['save_pretrained_is_hub']} "
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
