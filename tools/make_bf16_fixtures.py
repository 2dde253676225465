#!/usr/bin/env python3
"""Add bf16-autocast reference logits to the existing Hugging Face fixture folders.

Usage (from the repository root, after tools/make_hf_fixtures.py and tools/make_moe_fixtures.py;
both call this script's run_folder() at their end, so regenerating them regenerates these too):

    python3 tools/make_bf16_fixtures.py [--dirs tests/fixtures/hf tests/fixtures/hf_moe]

For every case directory of each folder (one holding config.json, model.safetensors,
tokens.safetensors and expected.safetensors) this writes

  expected_bf16_autocast.safetensors   logits F32 [B, T, V]  (bf16 values: the lm_head ran in bf16)
                                       loss   F32 []         (HF's model(input_ids, labels=labels).loss)

computed by the model loaded from that directory in float32 (``from_pretrained(dir,
dtype=torch.float32)``, HF's default attention ("sdpa"); MoE: ``experts_implementation="eager"``,
see run_case; eval mode, no grad) and
run under ``torch.autocast("cpu", dtype=torch.bfloat16)`` on the case's input_ids / labels: what a
PyTorch user gets from mixed precision on a CPU. The fp32 fixtures (model, tokens, expected) are
read, never written.

It then writes (or replaces) a section of ``<folder>/README.md`` between the markers below with the
command, the versions, the CPU, and per case the max |bf16-autocast logits - fp32 logits| (against
expected.safetensors' logits, which are the float64 reference rounded to float32, and against plain
HF float32), the loss differences, and for MoE cases how many (layer, token) router top-k selections
differ from the float32 run. A C++ bf16 test takes its tolerance from those numbers.

Reproducibility: seeded inputs and deterministic algorithms on one thread, but bf16 GEMM results
depend on the CPU's kernel (oneDNN on AMX, AVX-512-BF16 or AVX2 emulation sum in different orders
before the bf16 rounding of the output), so the files are bit-for-bit reproducible only on the same
kind of CPU and library versions. The README section names the CPU they were made on.
"""

from __future__ import annotations

import argparse
import json
import os
import platform

import safetensors
import torch
import transformers
from safetensors.torch import load_file, save_file
from torch_env import setup_torch

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DIRS = [os.path.join(REPO_ROOT, "tests", "fixtures", "hf"), os.path.join(REPO_ROOT, "tests", "fixtures", "hf_moe")]
OUT_NAME = "expected_bf16_autocast.safetensors"
BEGIN = "<!-- begin bf16-autocast: written by tools/make_bf16_fixtures.py, do not edit -->"
END = "<!-- end bf16-autocast -->"


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_bf16_isa() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        flags = []
    have = [x for x in ("amx_bf16", "avx512_bf16", "avx512f", "avx2") if x in flags]
    return ", ".join(have) if have else "unknown"


def router_topk_sets(router_logits, k: int) -> list:
    """Per sparse layer: the top-k expert index sets (sorted) of every token, as a [N, k] tensor."""
    out = []
    for z in router_logits:
        p = torch.softmax(z.float(), dim=-1)
        out.append(torch.topk(p, k, dim=-1).indices.sort(dim=-1).values)
    return out


def run_case(d: str) -> dict:
    cfg = json.load(open(os.path.join(d, "config.json")))
    is_moe = cfg.get("model_type") == "qwen3_moe"
    tokens = load_file(os.path.join(d, "tokens.safetensors"))
    input_ids, labels = tokens["input_ids"], tokens["labels"]
    ref_logits = load_file(os.path.join(d, "expected.safetensors"))["logits"]
    ref_loss = load_file(os.path.join(d, "expected.safetensors"))["loss"]

    # MoE: the per-expert F.linear loop, because HF's default experts implementation (grouped_mm:
    # torch._grouped_mm, not on CPU autocast's bf16 list) leaves the experts in float32 under
    # autocast, and the bf16 path under test runs its expert GEMMs in bf16.
    model = transformers.AutoModelForCausalLM.from_pretrained(
        d, dtype=torch.float32, **({"experts_implementation": "eager"} if is_moe else {}))
    model.eval()
    impl = f"attention `{model.config._attn_implementation}`"
    if is_moe:
        impl += f", experts `{getattr(model.config, '_experts_implementation', None)}`"
    with torch.no_grad():
        # No output_router_logits here: passing it True would add the aux loss to `loss` even for
        # cases whose config has it off, unlike expected.safetensors' loss.
        out32 = model(input_ids=input_ids, labels=labels)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out16 = model(input_ids=input_ids, labels=labels)
        if is_moe:
            router32 = model(input_ids=input_ids, output_router_logits=True).router_logits
            with torch.autocast("cpu", dtype=torch.bfloat16):
                router16 = model(input_ids=input_ids, output_router_logits=True).router_logits
        # informational: the same under the eager attention path
        model.set_attn_implementation("eager")
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out16_eager = model(input_ids=input_ids, labels=labels)
    logits16 = out16.logits.float().contiguous()
    loss16 = out16.loss.float().reshape(())
    save_file({"logits": logits16, "loss": loss16.contiguous()}, os.path.join(d, OUT_NAME))

    def maxdiff(a, b):
        return (a.double() - b.double()).abs().max().item()

    s = {
        "case": os.path.basename(d),
        "arch": cfg.get("model_type"),
        "impl": impl,
        "logits_dtype": str(out16.logits.dtype).replace("torch.", ""),
        "max_abs_ref_logit": ref_logits.abs().max().item(),
        "diff_ref": maxdiff(logits16, ref_logits),
        "diff_hf32": maxdiff(logits16, out32.logits),
        "diff_hf32_vs_ref": maxdiff(out32.logits, ref_logits),
        "diff_eager": maxdiff(logits16, out16_eager.logits.float()),
        "loss_diff_ref": abs(loss16.item() - ref_loss.item()),
        "loss": loss16.item(),
        "bytes": os.path.getsize(os.path.join(d, OUT_NAME)),
    }
    if is_moe:
        k = cfg["num_experts_per_tok"]
        sets32 = router_topk_sets(router32, k)
        sets16 = router_topk_sets(router16, k)
        s["routing_flips"] = sum(int((a != b).any(dim=-1).sum()) for a, b in zip(sets32, sets16))
        s["routing_total"] = sum(a.shape[0] for a in sets32)
    return s


def write_section(folder: str, stats: list, impls: str) -> None:
    rel = os.path.relpath(folder, REPO_ROOT)
    L = [BEGIN, "", "## bf16 autocast logits (`expected_bf16_autocast.safetensors`)", "",
         "Generated by `tools/make_bf16_fixtures.py` from the fp32 fixtures above (which it only reads):", "",
         "```sh", f"python3 tools/make_bf16_fixtures.py --dirs {rel}", "```", "",
         "Each case directory gets `expected_bf16_autocast.safetensors`: `logits` F32 [B, T, V] and `loss` F32 [] "
         "from the float32 model loaded from the directory (`from_pretrained(dir, dtype=torch.float32)`, "
         f"{impls}, eval, no grad) run under `torch.autocast(\"cpu\", dtype=torch.bfloat16)` on the case's "
         "`input_ids` (loss: `model(input_ids, labels=labels).loss`, HF's loss upcasts the bf16 logits to float32). "
         "Autocast runs the linear layers (q/k/v/o, MLP or experts, router, lm_head) and attention in bf16 with "
         "float32 accumulation; the embedding, RMSNorm (HF upcasts to float32), RoPE, the softmax (inside the attention kernel) and the loss stay float32. "
         "The residual stream stays float32 (HF's RMSNorm multiplies its float32 weight by the normalised "
         "activations, which promotes back to float32). The stored logits are the lm_head's bf16 outputs "
         "widened to float32.", ""]
    if any("routing_flips" in s for s in stats):
        L += ["MoE: the experts use `experts_implementation=\"eager\"` (a per-expert `F.linear` loop, bf16 under "
         "autocast). HF's default, `grouped_mm` (`torch._grouped_mm`), is not on CPU autocast's bf16 list: "
         "under autocast it leaves the experts in float32 (checked with torch 2.15: the experts' output with "
         "and without autocast is bit-identical), which is not the bf16 path a titan test checks.", ""]
    L += [f"Made with torch {torch.__version__}, transformers {transformers.__version__}, safetensors "
         f"{safetensors.__version__}, {torch.get_num_threads()} thread(s), deterministic algorithms, on "
         f"`{cpu_name()}` ({cpu_bf16_isa()}). bf16 results depend on the CPU's GEMM kernel (AMX, AVX-512-BF16 and "
         "AVX2 sum in different orders before rounding to bf16), so a rerun elsewhere may differ in the last bf16 "
         "bit of some logits; a test tolerance must allow for that.", "",
         "Observed differences (max over all B x T x V logits): `vs ref` = against `expected.safetensors`' logits "
         "(the float64 reference rounded to float32; what the C++ tests compare with), `vs hf32` = against plain "
         "HF float32 on the same model, `hf32 vs ref` for scale, `vs eager` = the same autocast run with "
         "`attn_implementation=\"eager\"` instead (how much the attention kernel choice alone moves bf16 logits). "
         "`routing` (MoE) = (layer, token) pairs whose router top-k expert set differs between the bf16-autocast "
         "and the float32 run.", "",
         "| case | max abs ref logit | vs ref | vs hf32 | hf32 vs ref | vs eager | loss | loss vs ref | routing | bytes |",
         "|---|---|---|---|---|---|---|---|---|---|"]
    for s in stats:
        routing = f"{s['routing_flips']} / {s['routing_total']}" if "routing_flips" in s else "-"
        L.append(f"| `{s['case']}` | {s['max_abs_ref_logit']:.4f} | {s['diff_ref']:.3e} | {s['diff_hf32']:.3e} | "
                 f"{s['diff_hf32_vs_ref']:.1e} | {s['diff_eager']:.3e} | {s['loss']:.6f} | {s['loss_diff_ref']:.2e} | "
                 f"{routing} | {s['bytes']} |")
    worst = max(stats, key=lambda s: s["diff_ref"])
    L += ["", f"Largest |bf16-autocast logits - fp32 logits| in this folder: **{worst['diff_ref']:.3e}** "
          f"(`{worst['case']}`, max |logit| {worst['max_abs_ref_logit']:.3f}).", "", END, ""]

    path = os.path.join(folder, "README.md")
    text = open(path).read() if os.path.exists(path) else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1].lstrip("\n")
        text = head.rstrip("\n") + "\n\n" + "\n".join(L) + tail
    else:
        text = text.rstrip("\n") + "\n\n" + "\n".join(L)
    with open(path, "w") as f:
        f.write(text)


def run_folder(folder: str) -> list:
    """Writes expected_bf16_autocast.safetensors into every case directory of `folder` and the README section."""
    cases = sorted(e for e in os.listdir(folder)
                   if os.path.isfile(os.path.join(folder, e, "expected.safetensors")))
    if not cases:
        raise SystemExit(f"make_bf16_fixtures: no case directories (with expected.safetensors) under {folder}; "
                         "run tools/make_hf_fixtures.py / make_moe_fixtures.py first")
    stats = []
    impls = set()
    for name in cases:
        d = os.path.join(folder, name)
        s = run_case(d)
        impls.add(s["impl"])
        stats.append(s)
        routing = f" routing flips {s['routing_flips']}/{s['routing_total']}" if "routing_flips" in s else ""
        print(f"{name:20s} bf16-autocast logits: vs ref {s['diff_ref']:.3e}, vs hf32 {s['diff_hf32']:.3e}, "
              f"vs eager-attn {s['diff_eager']:.3e}; loss {s['loss']:.6f} (vs ref {s['loss_diff_ref']:.2e})"
              f"{routing}; {s['bytes']} bytes")
    write_section(folder, stats, "; ".join(sorted(impls)))
    return stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dirs", nargs="+", default=DEFAULT_DIRS, help="fixture folders (default: hf and hf_moe)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = ap.parse_args()
    setup_torch(args.threads)
    for folder in args.dirs:
        run_folder(folder)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, cpu {cpu_name()} ({cpu_bf16_isa()})")


if __name__ == "__main__":
    main()
