#!/usr/bin/env python3
"""PyTorch peer for titan.cpp's mixture-of-experts benchmark (bench/moe_bench).

Times forward + backward of Hugging Face ``Qwen3MoeForCausalLM`` in PyTorch eager mode, float32,
on the CPU:

    model.zero_grad(set_to_none=True); loss = model(input_ids, labels=input_ids).loss; loss.backward()

Defaults are Qwen3-30B-A3B reduced as the seed's MoE run reduces it (4 layers, 64 experts, top-4;
hidden 2048, 32 heads / 4 kv heads, head_dim 128, expert FFN 768, vocab 151936, untied), B=1,
T=512, aux loss off. ``--experts eager`` is HF's loop over the experts that received tokens
(``Qwen3MoeExperts.forward``); ``--experts grouped_mm`` is transformers 5's default on this
machine (``torch._grouped_mm``). Random weights (HF init, seeded) and random tokens (seeded).
Prints one ``RESULT {json}`` line (median_s, tokens_per_s, peak_rss_mib) that the C++ bench parses.
"""

import argparse
import json
import resource
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser(description="HF Qwen3-MoE fp32 CPU forward+backward benchmark")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--experts", choices=["eager", "grouped_mm"], default="eager")
    ap.add_argument("--num-experts", type=int, default=64)
    ap.add_argument("--top-k", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--moe-intermediate", type=int, default=768)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()

    import torch
    import transformers
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    config = Qwen3MoeConfig(
        vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=6144,
        moe_intermediate_size=args.moe_intermediate, num_hidden_layers=args.layers,
        num_attention_heads=args.heads, num_key_value_heads=args.kv_heads, head_dim=args.head_dim,
        max_position_embeddings=max(args.seq, 128), rms_norm_eps=1e-6, use_cache=False, tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6}, num_experts=args.num_experts,
        num_experts_per_tok=args.top_k, norm_topk_prob=True, output_router_logits=False,
        decoder_sparse_step=1, mlp_only_layers=[],
    )
    config._attn_implementation = "sdpa"
    model = Qwen3MoeForCausalLM(config).float()
    model.set_experts_implementation(args.experts)
    model.train()
    gen = torch.Generator().manual_seed(1)
    input_ids = torch.randint(0, args.vocab, (args.batch, args.seq), generator=gen, dtype=torch.int64)
    tokens = args.batch * args.seq
    print(f"torch {torch.__version__} transformers {transformers.__version__} experts={args.experts} "
          f"threads={torch.get_num_threads()} params={sum(p.numel() for p in model.parameters()) / 1e6:.1f} M")

    def step() -> float:
        model.zero_grad(set_to_none=True)
        out = model(input_ids=input_ids, labels=input_ids)
        out.loss.backward()
        return out.loss.item()

    for i in range(args.warmup):
        t0 = time.perf_counter()
        loss = step()
        print(f"warmup {i}: {time.perf_counter() - t0:.3f} s loss={loss:.4f}")
    times = []
    for i in range(args.repeats):
        t0 = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - t0)
        print(f"step {i}: {times[-1]:.3f} s loss={loss:.4f} {tokens / times[-1]:.1f} tok/s")
    med = statistics.median(times)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result = {"impl": f"pytorch-eager-{args.experts}", "median_s": round(med, 6), "tokens_per_s": round(tokens / med, 3),
              "peak_rss_mib": round(peak, 1), "torch_version": torch.__version__,
              "transformers_version": transformers.__version__, "experts": args.experts,
              "step_times_s": [round(t, 6) for t in times]}
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
