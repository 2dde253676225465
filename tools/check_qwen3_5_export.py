#!/usr/bin/env python3
"""Checks a titan export of a multimodal Qwen3.5 folder in Transformers (not run in CI: no Python
there). Usage:

  python3 tools/check_qwen3_5_export.py EXPORT_DIR SOURCE_DIR

- EXPORT_DIR loads in its architecture class (Qwen3_5ForConditionalGeneration or
  Qwen3_5MoeForConditionalGeneration) strictly: no missing, unexpected or mismatched keys;
- every vision-tower tensor (model.visual.*) and MTP tensor (mtp.*) equals SOURCE_DIR's exactly;
- the export's logits on a few text tokens equal SOURCE_DIR's when the language model was not
  trained (a plain round trip), or are printed beside them otherwise.
Exit status 0 when the checks hold.
"""
import json
import sys

import torch
from safetensors import safe_open
import transformers


def tensors(folder):
    out = {}
    index = f"{folder}/model.safetensors.index.json"
    try:
        files = sorted(set(json.load(open(index))["weight_map"].values()))
    except FileNotFoundError:
        files = ["model.safetensors"]
    for name in files:
        with safe_open(f"{folder}/{name}", "pt") as f:
            for key in f.keys():
                out[key] = f.get_tensor(key)
    return out


def main():
    export_dir, source_dir = sys.argv[1], sys.argv[2]
    arch = json.load(open(f"{export_dir}/config.json"))["architectures"][0]
    cls = getattr(transformers, arch)
    model, info = cls.from_pretrained(export_dir, output_loading_info=True, dtype=torch.float32)
    problems = {k: v for k, v in info.items() if v and k != "error_msgs"}
    print(arch, "loading info:", problems or "strict (nothing missing, unexpected or mismatched)")
    a, b = tensors(source_dir), tensors(export_dir)
    kept = [k for k in a if k.startswith("model.visual.") or k.startswith("mtp.")]
    same = all(k in b and a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]) for k in kept)
    print(len(kept), "vision / MTP tensors, identical:", same)
    source = cls.from_pretrained(source_dir, dtype=torch.float32)
    ids = torch.tensor([[1, 5, 9, 17, 33, 65, 100]])
    with torch.no_grad():
        diff = (model(input_ids=ids).logits - source(input_ids=ids).logits).abs().max().item()
    print("max |logits(export) - logits(source)|:", diff)
    sys.exit(0 if not problems and same else 1)


if __name__ == "__main__":
    main()
