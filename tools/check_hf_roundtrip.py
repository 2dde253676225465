#!/usr/bin/env python3
"""Check a Hugging Face folder exported by titan (save_hf_folder) against Transformers.

Usage (from the repository root):

    # an existing export
    python3 tools/check_hf_roundtrip.py --model DIR --titan build/titan
    # import -> export of a tiny HF model first (hf_reexport = load_hf_model + save_hf_folder)
    python3 tools/check_hf_roundtrip.py --source tests/fixtures/hf/llama_bias \\
        --reexport build/tests/hf_reexport --titan build/titan [--dtype bfloat16] [--max-shard-bytes N]

What it checks, exiting non-zero on any failure:
  1. AutoModelForCausalLM.from_pretrained(DIR, dtype=torch.float32) loads the folder with no
     missing keys (bar lm_head.weight when tie_word_embeddings) and no unexpected or
     mismatched keys;
  2. with --source: every tensor of the export equals the source folder's (float32 export:
     bit-exact; bfloat16: the round-to-nearest-even of the source value);
  3. the logits of the loaded model (eager attention, float32) on fixed tokens match
     `titan forward --model DIR` on the same tokens: max abs err <= --atol (2e-4).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM


def read_folder(d: str) -> dict:
    """name -> tensor for a single-file or sharded HF folder."""
    single = os.path.join(d, "model.safetensors")
    if os.path.exists(single):
        files = [single]
    else:
        with open(os.path.join(d, "model.safetensors.index.json")) as f:
            files = sorted({os.path.join(d, v) for v in json.load(f)["weight_map"].values()})
    out = {}
    for fn in files:
        with safe_open(fn, "pt") as f:
            assert f.metadata() is not None and f.metadata().get("format") == "pt", f"{fn}: no format=pt metadata"
            for k in f.keys():
                out[k] = f.get_tensor(k)
    return out


EXPERT = re.compile(r"(.*\.mlp\.experts\.)(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")


def in_memory(sd: dict, name: str) -> torch.Tensor:
    """The loaded model's tensor for a file tensor name. transformers 5 fuses MoE experts in memory
    (mlp.experts.gate_up_proj [E, 2F, D]: rows [0, F) gate, [F, 2F) up; mlp.experts.down_proj
    [E, D, F]), so a per-expert file name is a slice of those."""
    if name in sd:
        return sd[name]
    m = EXPERT.match(name)
    if m is None:
        raise KeyError(f"{name} is neither a parameter of the loaded model nor a per-expert weight")
    prefix, e, proj = m.group(1), int(m.group(2)), m.group(3)
    if proj == "down_proj":
        return sd[prefix + "down_proj"][e]
    fused = sd[prefix + "gate_up_proj"][e]
    f = fused.shape[0] // 2
    return fused[:f] if proj == "gate_proj" else fused[f:]


def bf16_rne(t: torch.Tensor) -> torch.Tensor:
    return t.float().to(torch.bfloat16)  # torch rounds to nearest even


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="exported folder to check")
    ap.add_argument("--source", help="HF folder to import and re-export with --reexport first")
    ap.add_argument("--reexport", help="the hf_reexport binary (tests/models/hf_reexport_main.cpp)")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="export dtype (--source)")
    ap.add_argument("--max-shard-bytes", type=int, default=0, help="shard limit for the export (--source)")
    ap.add_argument("--titan", required=True, help="the titan binary (for `titan forward`)")
    ap.add_argument("--atol", type=float, default=2e-4)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=16)
    args = ap.parse_args()
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)

    work = tempfile.mkdtemp(prefix="titan_hf_roundtrip_")
    failures = []
    if args.source:
        if not args.reexport:
            ap.error("--source needs --reexport")
        model_dir = args.model or os.path.join(work, "export")
        cmd = [args.reexport, args.source, model_dir, args.dtype]
        if args.max_shard_bytes:
            cmd.append(str(args.max_shard_bytes))
        r = subprocess.run(cmd, capture_output=True, text=True)
        print(f"$ {' '.join(cmd)}\n{r.stdout.strip()}{r.stderr.strip()}")
        if r.returncode != 0:
            print("FAIL: export failed")
            return 1
    elif args.model:
        model_dir = args.model
    else:
        ap.error("give --model or --source")

    files = sorted(os.listdir(model_dir))
    print(f"folder {model_dir}: {', '.join(files)}")
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    tied = bool(cfg.get("tie_word_embeddings", False))

    # 1. Transformers loads it with nothing missing or unexpected.
    model, info = AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    model.eval()
    allowed_missing = {"lm_head.weight"} if tied else set()
    missing = sorted(set(info.get("missing_keys", [])) - allowed_missing)
    unexpected = sorted(info.get("unexpected_keys", []))
    mismatched = list(info.get("mismatched_keys", []))
    print(f"transformers {transformers.__version__}: {type(model).__name__}, "
          f"{sum(p.numel() for p in model.parameters())} parameters, tied={tied}")
    print(f"missing keys: {sorted(info.get('missing_keys', [])) or 'none'} "
          f"(allowed: {sorted(allowed_missing) or 'none'}); unexpected keys: {unexpected or 'none'}; "
          f"mismatched: {mismatched or 'none'}")
    if missing or unexpected or mismatched:
        failures.append("missing/unexpected/mismatched keys")
    if tied and model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr():
        failures.append("lm_head is not tied to embed_tokens")

    # 2. The export holds the source's tensors.
    exported = read_folder(model_dir)
    if args.source:
        src = read_folder(args.source)
        want_keys = set(src) - ({"lm_head.weight"} if tied else set())
        if set(exported) != want_keys:
            failures.append(f"tensor names differ from the source: {sorted(set(exported) ^ want_keys)}")
        worst = 0
        for k in sorted(want_keys & set(exported)):
            want = src[k].float() if args.dtype == "float32" else bf16_rne(src[k])
            got = exported[k]
            if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
                worst += 1
                print(f"  tensor {k}: {got.dtype}{list(got.shape)} differs from the source")
        print(f"tensors vs source: {len(want_keys)} compared, {worst} differ "
              f"({'bit-exact' if args.dtype == 'float32' else 'bf16 round-to-nearest-even of the source'})")
        if worst:
            failures.append("tensor values")
    sd = model.state_dict()
    for k, v in exported.items():
        if not torch.equal(in_memory(sd, k), v.float()):
            failures.append(f"transformers' {k} differs from the file")

    # 3. Logits vs titan forward.
    vocab = cfg["vocab_size"]
    ids = torch.randint(0, vocab, (args.batch, args.seq), generator=torch.Generator().manual_seed(1234))
    tokens = os.path.join(work, "tokens.safetensors")
    out = os.path.join(work, "titan_out.safetensors")
    save_file({"input_ids": ids.contiguous()}, tokens)
    cmd = [args.titan, "forward", "--model", model_dir, "--tokens", tokens, "--out", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"$ {' '.join(cmd)}\n{r.stdout}{r.stderr}")
        print("FAIL: titan forward failed")
        return 1
    titan_logits = load_file(out)["logits"]
    with torch.no_grad():
        hf_logits = model(input_ids=ids).logits.float()
    err = (titan_logits.double() - hf_logits.double()).abs().max().item()
    print(f"logits [{args.batch}, {args.seq}, {vocab}]: max |logit| {hf_logits.abs().max().item():.4f}, "
          f"max abs err titan vs transformers {err:.3e} (bar {args.atol:g})")
    if not err <= args.atol:
        failures.append(f"logits max abs err {err:.3e} > {args.atol:g}")

    if failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    _work = tempfile.mkdtemp(prefix="titan_hf_roundtrip_")
    tempfile.mkdtemp = lambda prefix="": _work  # main()'s scratch folder, removed below
    try:
        sys.exit(main())
    finally:
        shutil.rmtree(_work, ignore_errors=True)
