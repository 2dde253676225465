#!/usr/bin/env python3
"""Greedy-generation fixtures for `titan generate` (tests/integration/cli_generate_test.cpp).

For tiny dense and MoE Hugging Face fixtures already committed (tests/fixtures/hf/<case>,
tests/fixtures/hf_moe/<case>), runs Transformers `generate(do_sample=False, ...)` on a batch of
prompts of different lengths (left-padded, with an attention_mask, as HF batches them) and writes
under tests/fixtures/generate/<case>/:

  generation_config.json  eos_token_id (a list: one id that greedy decoding first emits part-way, so a
                          row finishes early and is padded, plus one it never emits) and pad_token_id
  tokens.safetensors      input_ids I64 [B, T] (left-padded with pad_token_id), attention_mask I64 [B, T]
  expected.safetensors    output_ids I64 [B, T + n] from HF generate (n <= MAX_NEW_TOKENS)

The test copies the source fixture's config.json + model.safetensors next to generation_config.json
and requires titan's `--temperature 0` output ids to be identical. The smallest top-1 / top-2 logit
gap over all steps of unfinished rows is printed (and recorded in README.md): ids can only be
compared exactly when no step is a near tie.

Run from the repository root: python3 tools/make_generate_fixtures.py
"""
from __future__ import annotations

import json
import os
import sys

import torch
import transformers
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_env import setup_torch  # noqa: E402

MAX_NEW_TOKENS = 12
PROMPT_LENGTHS = [5, 9, 3]
CASES = [("hf/untied_gqa2", "untied_gqa2"), ("hf/tied_mha", "tied_mha"), ("hf_moe/e8_top2_norm", "moe_e8_top2_norm"),
         ("hf_qwen3_5/text", "qwen3_5_text")]


def load(src: str):
    kwargs = dict(attn_implementation="eager", dtype=torch.float32)
    if "hf_moe" in src:
        kwargs["experts_implementation"] = "eager"
    model = transformers.AutoModelForCausalLM.from_pretrained(src, **kwargs)
    model.eval()
    return model


def run(model, ids, mask, eos, pad):
    gen = transformers.GenerationConfig(do_sample=False, max_new_tokens=MAX_NEW_TOKENS, eos_token_id=eos,
                                        pad_token_id=pad, use_cache=True)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=gen, output_scores=True,
                             return_dict_in_generate=True)
    return out.sequences, out.scores


def min_gap(sequences, scores, prompt_len, eos):
    gap = float("inf")
    finished = torch.zeros(sequences.shape[0], dtype=torch.bool)
    for step, s in enumerate(scores):
        top = torch.topk(s, 2, dim=-1).values
        for b in range(s.shape[0]):
            if not finished[b]:
                gap = min(gap, float(top[b, 0] - top[b, 1]))
        finished |= torch.isin(sequences[:, prompt_len + step], torch.tensor(eos or [-1]))
    return gap


def attempt(model, seed: int):
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(seed)
    T = max(PROMPT_LENGTHS)
    pad = vocab - 1
    ids = torch.full((len(PROMPT_LENGTHS), T), pad, dtype=torch.int64)
    mask = torch.zeros_like(ids)
    for b, n in enumerate(PROMPT_LENGTHS):
        ids[b, T - n:] = torch.randint(0, vocab - 1, (n,), generator=g)
        mask[b, T - n:] = 1
    # Without EOS first: the EOS is an id some row first emits at step 2 or later (that row then
    # finishes early), plus one no row emits.
    seq, _ = run(model, ids, mask, None, pad)
    rows = [seq[b, T:].tolist() for b in range(seq.shape[0])]
    early = [r[s] for r in rows for s in range(2, MAX_NEW_TOKENS) if r[s] not in r[:s]]
    never = next(i for i in range(vocab - 2, 0, -1) if i not in seq[:, T:].flatten().tolist())
    eos = ([early[0]] if early else []) + [never]
    seq, scores = run(model, ids, mask, eos, pad)
    return ids, mask, seq, eos, min_gap(seq, scores, T, eos)


def main() -> None:
    setup_torch(1)
    root = os.path.join("tests", "fixtures")
    lines = []
    for src_rel, name in CASES:
        src = os.path.join(root, src_rel)
        model = load(src)
        for seed in range(1234, 1264):  # the first prompts without a near tie
            ids, mask, seq, eos, gap = attempt(model, seed)
            if gap > 1e-3:
                break
        assert gap > 1e-3, f"{name}: every prompt set has a near tie (top-1 - top-2 = {gap})"
        pad = int(ids[0, 0])
        out = os.path.join(root, "generate", name)
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "generation_config.json"), "w") as f:
            json.dump({"eos_token_id": eos, "pad_token_id": pad}, f, indent=2)
            f.write("\n")
        save_file({"input_ids": ids.contiguous(), "attention_mask": mask.contiguous()},
                  os.path.join(out, "tokens.safetensors"))
        save_file({"output_ids": seq.contiguous()}, os.path.join(out, "expected.safetensors"))
        lines.append(f"| `{name}` | `{src_rel}` | {list(ids.shape)} | {list(seq.shape)} | {eos} | {pad} | {gap:.4f} |")
        print(name, "output", list(seq.shape), "eos", eos, "min gap", gap)
    with open(os.path.join(root, "generate", "README.md"), "w") as f:
        f.write("# Greedy generation fixtures\n\nGenerated by `tools/make_generate_fixtures.py` (see its docstring); do not "
                "edit by hand. Regenerate with\n\n```sh\npython3 tools/make_generate_fixtures.py\n```\n\n"
                f"torch {torch.__version__}, transformers {transformers.__version__}; max_new_tokens "
                f"{MAX_NEW_TOKENS}, prompt lengths {PROMPT_LENGTHS} (left-padded).\n\n"
                "| case | model | input_ids | output_ids | eos_token_id | pad_token_id | min top-1 gap |\n"
                "|---|---|---|---|---|---|---|\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
