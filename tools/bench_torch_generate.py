#!/usr/bin/env python3
"""PyTorch peer for titan.cpp's decode benchmark (bench/generate_bench).

Hugging Face ``Qwen3ForCausalLM`` with Qwen3-0.6B shapes (hidden 1024, 16 heads, 8 kv heads,
head_dim 128, intermediate 3072, vocab 151936, tied embeddings; 28 layers by default), random
weights (HF init, seeded), on the CPU, one stream: ``model.generate(prompt, do_sample=False,
max_new_tokens=N, min_new_tokens=N)`` with its KV cache (DynamicCache), as a user runs it:

  --precision bf16   the model in bfloat16 (``model.to(torch.bfloat16)``: bf16 weights, bf16
                     activations and KV cache; what ``dtype=torch.bfloat16`` loading gives)
  --precision fp32   float32 throughout

Decode tokens/s = (N - 1) / (time of the last step - time of the first), timed by a logits
processor that records when each step's logits are ready (the first is the prefill's), so the
prefill is excluded, as in titan's figure. Median over --repeats runs after one warm-up run.
Prints a ``RESULT {json}`` line for bench/harness.h.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import transformers
from transformers import LogitsProcessor, LogitsProcessorList, Qwen3Config, Qwen3ForCausalLM


class StepClock(LogitsProcessor):
    def __init__(self):
        self.times = []

    def __call__(self, input_ids, scores):
        self.times.append(time.perf_counter())
        return scores


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=28)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=a.vocab, hidden_size=1024, intermediate_size=3072, num_hidden_layers=a.layers,
                      num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
                      rms_norm_eps=1e-6, rope_theta=1e6, tie_word_embeddings=True, use_cache=True)
    dtype = torch.bfloat16 if a.precision == "bf16" else torch.float32
    model = Qwen3ForCausalLM(cfg).to(dtype).eval()
    ids = torch.randint(0, a.vocab, (1, a.prompt), generator=torch.Generator().manual_seed(1))
    gen = transformers.GenerationConfig(do_sample=False, max_new_tokens=a.new, min_new_tokens=a.new,
                                        eos_token_id=None, pad_token_id=0, use_cache=True)

    def run(n_new):
        clock = StepClock()
        g = transformers.GenerationConfig(**{**gen.to_dict(), "max_new_tokens": n_new, "min_new_tokens": n_new})
        t0 = time.perf_counter()
        with torch.inference_mode():
            model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=g,
                           logits_processor=LogitsProcessorList([clock]))
        return clock.times[0] - t0, (len(clock.times) - 1) / (clock.times[-1] - clock.times[0])

    run(4)  # warm-up
    runs = [run(a.new) for _ in range(a.repeats)]
    result = {"peer": f"transformers generate {a.precision}", "torch": torch.__version__,
              "transformers": transformers.__version__, "threads": a.threads, "layers": a.layers,
              "prompt": a.prompt, "new_tokens": a.new,
              "prefill_s": statistics.median(r[0] for r in runs),
              "decode_tok_s": statistics.median(r[1] for r in runs)}
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
