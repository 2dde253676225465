#!/usr/bin/env python3
"""How far titan's Qwen3.5 gradients are from Transformers' float64 ones, against how far
Transformers' own float32 run is (issue 49: every gradient within 2x of float32's error).

  python3 tools/check_qwen3_5_grads.py --titan build/titan --folders text,moe,multimodal,moe_multimodal
  python3 tools/check_qwen3_5_grads.py --titan build/titan [--init fixture|hf] [--seeds 1,2,3] [--tokens 70,200]

--folders: the committed folders of tests/fixtures/hf_qwen3_5 on their tokens (a multimodal
folder's language model as Transformers loads it, its gradients under the folder's names).
Otherwise, random folders:

For each seed: a random Qwen3_5ForCausalLM folder (tools/make_qwen3_5_fixtures.py's TEXT shape and
randomize(), seeded), random input_ids [2, T] and labels; the float64 run (the module's float32
casts made float64, as that script does), the float32 run, and `titan forward --grads` on the
folder. Prints, per gradient kind, the worst ratio titan / float32 of the relative L2 errors
against float64, and the rows of A_log and dt_bias. Exits 1 when a ratio passes --max-ratio.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import torch
import transformers
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_qwen3_5_fixtures as fx  # noqa: E402
from transformers.models.qwen3_5 import modeling_qwen3_5  # noqa: E402


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def grads(model, ids, labels):
    """Gradients under the checkpoint's names (fused expert gradients split per expert)."""
    model.zero_grad()
    model(input_ids=ids, labels=labels).loss.backward()
    for p in model.parameters():  # a multimodal model's vision tower takes no part in a text forward
        if p.grad is None:
            p.requires_grad_(False)
    return {name[len("grad."):]: g for name, g in fx.checkpoint_grads(model).items()}


def report(label, g32, g64, titan, names=lambda n: n):
    worst = {}
    for name, ref in g64.items():
        e32, et = rel(g32[name], ref), rel(titan["grad." + names(name)], ref)
        kind = name.rsplit(".", 1)[-1] if name.endswith(("A_log", "dt_bias")) else "other"
        ratio = et / max(e32, 1e-7)  # below 1e-7 both are at float32's rounding
        if ratio > worst.get(kind, (0.0, ""))[0]:
            worst[kind] = (ratio, name, et, e32)
    for kind, (ratio, name, et, e32) in sorted(worst.items()):
        print(f"{label} {kind:8s} worst {ratio:5.2f}x  {name}: titan {et:.2e}, float32 {e32:.2e}")
    return max(r for r, *_ in worst.values())


def check_folders(args):
    base = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "hf_qwen3_5")
    tokens = os.path.join(base, "expected.safetensors")
    t = load_file(tokens)
    ids, labels = t["input_ids"].long(), t["labels"].long()
    worst_all = 0.0
    for folder in args.folders.split(","):
        path = os.path.join(base, folder)
        model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32,
                                                                     attn_implementation="eager")
        model.config._experts_implementation = "eager"  # the per-expert loop (grouped_mm has no float64)
        module = sys.modules[type(model).__module__]
        g32 = grads(model, ids, labels)
        original = module.torch
        fx.float64_module(module)
        g64 = grads(model.double(), ids, labels)
        module.torch = original
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([args.titan, "forward", "--grads", "--model", path, "--tokens", tokens, "--out",
                            os.path.join(tmp, "out.safetensors")], check=True, capture_output=True)
            titan = load_file(os.path.join(tmp, "out.safetensors"))
        # Transformers loads a multimodal folder's language model as the text model (model.*); the
        # folder, its export and titan's gradients name it model.language_model.*.
        multimodal = "model.language_model.embed_tokens.weight" in {k[len("grad."):] for k in titan}
        names = (lambda n: "model.language_model." + n[len("model."):] if n.startswith("model.") else n) if multimodal \
            else (lambda n: n)
        worst_all = max(worst_all, report(folder, g32, g64, titan, names))
    print(f"worst ratio {worst_all:.2f} (limit {args.max_ratio})")
    return 0 if worst_all <= args.max_ratio else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--titan", default="build/titan")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--tokens", default="70,200")
    ap.add_argument("--max-ratio", type=float, default=2.0)
    ap.add_argument("--init", choices=["fixture", "hf"], default="fixture",
                    help="fixture: make_qwen3_5_fixtures.randomize(); hf: Transformers' own initialization")
    ap.add_argument("--folders", default="",
                    help="instead of random folders: the committed ones, e.g. text,moe (tests/fixtures/hf_qwen3_5, "
                         "the text folder's tokens)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    worst_all = 0.0
    if args.folders:
        return check_folders(args)
    for seed in map(int, args.seeds.split(",")):
        for T in map(int, args.tokens.split(",")):
            with tempfile.TemporaryDirectory() as tmp:
                torch.manual_seed(seed)
                model = fx.Qwen3_5ForCausalLM(fx.Qwen3_5TextConfig(**fx.TEXT)).float().eval()
                model.config._attn_implementation = "eager"
                if args.init == "fixture":
                    fx.randomize(model, seed)
                model.save_pretrained(os.path.join(tmp, "m"))
                gen = torch.Generator().manual_seed(100 + seed)
                ids = torch.randint(0, fx.TEXT["vocab_size"], (2, T), generator=gen)
                labels = ids.clone()
                save_file({"input_ids": ids, "labels": labels}, os.path.join(tmp, "tokens.safetensors"))
                g32 = grads(model, ids, labels)
                original = modeling_qwen3_5.torch
                fx.float64_module(modeling_qwen3_5)
                g64 = grads(model.double(), ids, labels)
                modeling_qwen3_5.torch = original
                subprocess.run([args.titan, "forward", "--grads", "--model", os.path.join(tmp, "m"), "--tokens",
                                os.path.join(tmp, "tokens.safetensors"), "--out", os.path.join(tmp, "out.safetensors")],
                               check=True, capture_output=True)
                titan = load_file(os.path.join(tmp, "out.safetensors"))
                worst = {}
                for name, ref in g64.items():
                    e32, et = rel(g32[name], ref), rel(titan["grad." + name], ref)
                    kind = name.rsplit(".", 1)[-1] if name.endswith(("A_log", "dt_bias")) else "other"
                    ratio = et / max(e32, 1e-7)  # below 1e-7 both are at float32's rounding
                    if ratio > worst.get(kind, (0.0, ""))[0]:
                        worst[kind] = (ratio, name, et, e32)
                for kind, (ratio, name, et, e32) in sorted(worst.items()):
                    print(f"seed {seed} T {T:4d} {kind:8s} worst {ratio:5.2f}x  {name}: titan {et:.2e}, "
                          f"float32 {e32:.2e}")
                    worst_all = max(worst_all, ratio)
    print(f"worst ratio {worst_all:.2f} (limit {args.max_ratio})")
    return 0 if worst_all <= args.max_ratio else 1


if __name__ == "__main__":
    sys.exit(main())
