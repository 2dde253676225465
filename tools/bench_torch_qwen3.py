#!/usr/bin/env python3
"""PyTorch peer for titan.cpp's end-to-end training-step benchmark.

Runs Hugging Face ``Qwen3ForCausalLM`` on the CPU and times full training steps:

    model.zero_grad(set_to_none=True); loss = model(input_ids, labels=input_ids).loss;
    loss.backward()

in one of the ways a PyTorch user would train it:

  --precision fp32            (default) PyTorch eager, float32 throughout.
  --precision bf16-autocast   forward + loss under ``torch.autocast("cpu", dtype=torch.bfloat16)``,
                              backward outside it (PyTorch's recipe); float32 master weights,
                              float32 gradients and float32 AdamW state (autocast casts the
                              weights to bf16 for the matmuls/attention it covers, and the casts
                              are differentiated back to float32 gradients).
  --compile                   ``model = torch.compile(model)`` (default inductor backend, default
                              mode), in either precision.  Compilation happens in the warm-up
                              steps (at least 2 with --compile, so that a recompilation on the
                              second step is not timed either); the first warm-up step's time minus
                              the median timed step is reported as ``compile_s``.  If the timed
                              steps still compiled a graph, the output says so (``recompiled_in_timed``).

(HF's causal-LM loss = labels shifted by one inside the model, mean over the B*(T-1) targets).
With ``--train-step`` the step is a whole training step as titan's trainer runs it (bench/train_bench):
the above, then ``torch.nn.utils.clip_grad_norm_(max_norm=1.0)`` and ``torch.optim.AdamW``
(lr 3e-4, betas (0.9, 0.95), eps 1e-8, weight_decay 0.1, PyTorch's default implementation);
``--optimizer muon`` steps torch.optim.Muon (lr 3e-4, weight_decay 0.1, momentum 0.95, Nesterov,
match_rms_adamw) over model.layers.*'s 2-D weights and that AdamW over the rest instead.
Random weights (HF init, seeded) and random tokens (seeded).

Defaults are the "bench config": hidden 1024, 16 heads, 8 kv heads, head_dim 128,
intermediate 3072, vocab 151936, 4 layers, tied embeddings, rope_theta 1e6,
rms_norm_eps 1e-6, batch 1, seq 2048, 2 threads, attn_implementation "sdpa".

    python3 tools/bench_torch_qwen3.py                      # full bench config
    python3 tools/bench_torch_qwen3.py --layers 1 --vocab 1000 --seq 128   # quick
    python3 tools/bench_torch_qwen3.py --train-step --precision bf16-autocast --compile
    python3 tools/bench_torch_qwen3.py --attn eager --profile

FLOP convention (shared with the C++ benchmark; see ``train_flops_per_token``)
-----------------------------------------------------------------------------
Training FLOPs per token = 6 * N_matmul + 12 * L * H * D * T, where

  N_matmul = L * (  hidden*H*D          # q_proj
                  + 2*hidden*KV*D       # k_proj, v_proj
                  + H*D*hidden          # o_proj
                  + 3*hidden*I )        # gate_proj, up_proj, down_proj
             + V*hidden                 # lm_head matmul (counted even when tied
                                        #  to the embedding: the matmul is executed)
  L = layers, H = attention heads, KV = kv heads, D = head_dim, I = intermediate,
  V = vocab, T = sequence length.

6*N_matmul is 2 FLOPs per multiply-add, times 3 for forward + backward (dX and
dW).  The embedding lookup (a gather), RMSNorms, biases, RoPE, SiLU, residuals and
the softmax/cross-entropy are not counted.  The attention term 12*L*H*D*T is the
PaLM / torchtitan convention: QK^T and PV, 2 FLOPs per MAC each, over the FULL
T x T score matrix (causal masking is NOT halved), times 3 for fwd+bwd.  The
causal-only attention work would be half of that term; the script prints it for
information but all reported GFLOP/s use the formula above.

Step FLOPs = train_flops_per_token * B * T;  GFLOP/s = step FLOPs / median step
seconds / 1e9.

Memory
------
``peak_rss_mib`` is the process high-water RSS (``resource.getrusage`` ru_maxrss)
after the timed steps (before the optional profiler step).  Also printed: the
high-water mark at start, the current RSS in steady state (model, inputs, no
grads) right before the first step, and the peak minus that steady-state RSS
(= the transient memory of a training step: activations, logits, gradients).

With --compile the peak includes whatever compilation held in this process (Inductor's
compile workers are separate processes and are not counted).

Output: human-readable lines, then one final line ``RESULT {json}`` with keys
impl ("pytorch-eager" or "pytorch-compile"), precision ("fp32" or "bf16-autocast"),
compile (bool), compile_s (0 without --compile), threads, tokens_per_step, median_s,
tokens_per_s, gflops, peak_rss_mib, torch_version (plus a few extra informational keys).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import time


def train_flops_per_token(*, layers: int, hidden: int, heads: int, kv_heads: int, head_dim: int,
                          intermediate: int, vocab: int, seq: int) -> dict:
    """Training (fwd+bwd) FLOPs per token; see the module docstring for the convention.

    Returns a dict with n_matmul, dense (6*n_matmul), attn (12*L*H*D*T), total,
    and attn_causal (half of attn, informational only).
    """
    per_layer = (hidden * heads * head_dim          # q_proj
                 + 2 * hidden * kv_heads * head_dim  # k_proj, v_proj
                 + heads * head_dim * hidden         # o_proj
                 + 3 * hidden * intermediate)        # gate, up, down
    n_matmul = layers * per_layer + vocab * hidden  # + lm_head (tied or not)
    dense = 6 * n_matmul
    attn = 12 * layers * heads * head_dim * seq
    return {"n_matmul": n_matmul, "dense": dense, "attn": attn, "total": dense + attn,
            "attn_causal": attn // 2}


def train_flops_per_token_qwen3_5(*, layers: int, hidden: int, heads: int, kv_heads: int, head_dim: int,
                                  intermediate: int, vocab: int, seq: int, linear_key_heads: int,
                                  linear_value_heads: int, linear_head_dim: int) -> dict:
    """Qwen3.5 (every 4th layer full attention with an output gate, the others gated DeltaNet):
    6 * N_matmul + 12 * L_full * H * D * T + the delta rule's 24 * L_linear * Hv * Dk * Dv, as
    titan's models/decoder/flops.cpp counts it (the delta rule: its forward's state update and
    readout, 4 multiply-adds per state element, x 3 for fwd + bwd)."""
    full = sum(1 for i in range(layers) if (i + 1) % 4 == 0)
    linear = layers - full
    q, kv = heads * head_dim, kv_heads * head_dim
    attention = hidden * 2 * q + 2 * hidden * kv + q * hidden
    k_width, v_width = linear_key_heads * linear_head_dim, linear_value_heads * linear_head_dim
    linear_attention = hidden * (2 * k_width + v_width) + hidden * v_width + 2 * hidden * linear_value_heads + v_width * hidden
    n_matmul = full * attention + linear * linear_attention + layers * 3 * hidden * intermediate + vocab * hidden
    dense = 6 * n_matmul
    attn = 12 * full * heads * head_dim * seq
    delta = 24 * linear * linear_value_heads * linear_head_dim * linear_head_dim
    return {"n_matmul": n_matmul, "dense": dense, "attn": attn + delta, "delta_rule": delta,
            "total": dense + attn + delta, "attn_causal": attn // 2 + delta}


def rss_now_mib() -> float:
    """Current resident set size (Linux /proc), MiB."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return float("nan")


def maxrss_mib() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / 2**20 if sys.platform == "darwin" else r / 1024  # bytes on macOS, KiB on Linux


def main() -> None:
    ap = argparse.ArgumentParser(description="HF Qwen3 CPU training-step benchmark (PyTorch eager or compiled, "
                                             "fp32 or bf16 autocast)")
    ap.add_argument("--arch", choices=["qwen3", "qwen3_5"], default="qwen3",
                    help="qwen3: Qwen3ForCausalLM; qwen3_5: Qwen3_5ForCausalLM (gated DeltaNet layers with every 4th "
                         "a gated full attention; Transformers' PyTorch fallback of the chunked delta rule and "
                         "the causal conv1d) — give it its shape with the flags below")
    ap.add_argument("--linear-key-heads", type=int, default=16, help="qwen3_5: linear_num_key_heads")
    ap.add_argument("--linear-value-heads", type=int, default=16, help="qwen3_5: linear_num_value_heads")
    ap.add_argument("--linear-head-dim", type=int, default=128, help="qwen3_5: linear key and value head dim")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--intermediate", type=int, default=3072)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--rope-theta", type=float, default=1e6)
    ap.add_argument("--rms-eps", type=float, default=1e-6)
    ap.add_argument("--untied", action="store_true", help="untie lm_head from the embedding (default: tied)")
    ap.add_argument("--attn", choices=["sdpa", "eager"], default="sdpa")
    ap.add_argument("--precision", choices=["fp32", "bf16-autocast"], default="fp32",
                    help="fp32: eager float32; bf16-autocast: forward + loss under torch.autocast('cpu', bfloat16), "
                         "float32 master weights and AdamW")
    ap.add_argument("--compile", action="store_true",
                    help="wrap the model in torch.compile (compilation happens in >= 2 untimed warm-up steps)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps first (raised to 2 with --compile)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--train-step", action="store_true",
                    help="time zero_grad + fwd + bwd + clip_grad_norm_ + AdamW.step (else fwd + bwd)")
    ap.add_argument("--optimizer", choices=["adamw", "muon"], default="adamw",
                    help="muon: torch.optim.Muon (match_rms_adamw) over model.layers.*'s 2-D weights, AdamW over the "
                         "rest (as titan's optimizer.name Muon splits them)")
    ap.add_argument("--profile", action="store_true", help="profile one extra step, print top-15 ops by self CPU")
    args = ap.parse_args()
    if args.compile:
        args.warmup = max(args.warmup, 2)

    rss_start_hw = maxrss_mib()
    os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # quiet the profiler backend's stderr chatter
    import torch
    import transformers
    from transformers import Qwen3Config, Qwen3ForCausalLM
    transformers.logging.set_verbosity_error()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    print(f"torch {torch.__version__}  transformers {transformers.__version__}  python {platform.python_version()}")
    print(f"cpu: {platform.processor() or platform.machine()}  os.cpu_count={os.cpu_count()}  "
          f"torch threads={torch.get_num_threads()}  interop={torch.get_num_interop_threads()}  "
          f"mkldnn={torch.backends.mkldnn.is_available()}  mkl={torch.backends.mkl.is_available()}")
    for k in sorted(os.environ):
        if k.startswith(("OPENBLAS_", "OMP_", "MKL_", "KMP_", "GOMP_")):
            print(f"env {k}={os.environ[k]}")
    try:
        print("loadavg:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    except OSError:
        pass

    common = dict(
        vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.intermediate,
        num_hidden_layers=args.layers, num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
        head_dim=args.head_dim, hidden_act="silu", max_position_embeddings=max(args.seq, 128),
        rms_norm_eps=args.rms_eps, use_cache=False, tie_word_embeddings=not args.untied,
        attention_bias=False, attention_dropout=0.0,
    )
    if args.arch == "qwen3_5":
        from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig
        config = Qwen3_5TextConfig(
            **common, layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention"
                                   for i in range(args.layers)],
            linear_num_key_heads=args.linear_key_heads, linear_num_value_heads=args.linear_value_heads,
            linear_key_head_dim=args.linear_head_dim, linear_value_head_dim=args.linear_head_dim,
            linear_conv_kernel_dim=4,
            rope_parameters={"rope_type": "default", "rope_theta": args.rope_theta, "partial_rotary_factor": 0.25,
                             "mrope_section": [11, 11, 10], "mrope_interleaved": True})
        model_class = Qwen3_5ForCausalLM
    else:
        config = Qwen3Config(**common, rope_parameters={"rope_type": "default", "rope_theta": args.rope_theta})
        model_class = Qwen3ForCausalLM
    config._attn_implementation = args.attn
    t0 = time.perf_counter()
    model = model_class(config).float()
    model.config._attn_implementation = args.attn
    model.train()
    t_build = time.perf_counter() - t0
    n_params = sum(p.numel() for p in model.parameters())
    gen = torch.Generator().manual_seed(args.seed + 1)
    input_ids = torch.randint(0, args.vocab, (args.batch, args.seq), generator=gen, dtype=torch.int64)
    labels = input_ids

    shape = dict(layers=args.layers, hidden=args.hidden, heads=args.heads, kv_heads=args.kv_heads,
                 head_dim=args.head_dim, intermediate=args.intermediate, vocab=args.vocab, seq=args.seq)
    if args.arch == "qwen3_5":
        fl = train_flops_per_token_qwen3_5(**shape, linear_key_heads=args.linear_key_heads,
                                           linear_value_heads=args.linear_value_heads,
                                           linear_head_dim=args.linear_head_dim)
    else:
        fl = train_flops_per_token(**shape)
    tokens = args.batch * args.seq
    step_flops = fl["total"] * tokens
    print(f"config: {args.arch} L={args.layers} hidden={args.hidden} H={args.heads} KV={args.kv_heads} D={args.head_dim} "
          f"I={args.intermediate} V={args.vocab} tied={not args.untied} B={args.batch} T={args.seq} "
          f"attn={model.config._attn_implementation}")
    print(f"params: {n_params / 1e6:.2f} M total, N_matmul {fl['n_matmul'] / 1e6:.2f} M (build {t_build:.1f} s)")
    print(f"precision: {args.precision}  compile: {args.compile}")
    print(f"flops/token: 6*N={fl['dense'] / 1e9:.4f} G + attn 12*L*H*D*T={fl['attn'] / 1e9:.4f} G "
          f"= {fl['total'] / 1e9:.4f} G  (causal-only attn would be {fl['attn_causal'] / 1e9:.4f} G); "
          f"step = {step_flops / 1e12:.4f} TFLOP")

    optimizers = []
    if args.train_step and args.optimizer == "muon":
        hidden = [p for n, p in model.named_parameters() if n.startswith("model.layers.") and p.ndim == 2]
        rest = [p for n, p in model.named_parameters() if not (n.startswith("model.layers.") and p.ndim == 2)]
        optimizers = [torch.optim.Muon(hidden, lr=3e-4, weight_decay=0.1, momentum=0.95, nesterov=True,
                                       adjust_lr_fn="match_rms_adamw"),
                      torch.optim.AdamW(rest, lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)]
    elif args.train_step:
        optimizers = [torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)]

    # The optimizer and clipping see the original (float32) parameters; torch.compile's wrapper
    # shares them. autocast covers forward + loss only, as PyTorch's AMP recipe has it.
    run_model = torch.compile(model) if args.compile else model
    if args.precision == "bf16-autocast":
        def autocast():
            return torch.autocast("cpu", dtype=torch.bfloat16)
    else:
        import contextlib

        def autocast():
            return contextlib.nullcontext()

    def step():
        model.zero_grad(set_to_none=True)
        with autocast():
            out = run_model(input_ids=input_ids, labels=labels)
        out.loss.backward()
        if optimizers:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            for optimizer in optimizers:
                optimizer.step()
        return out.loss.item()

    def graphs_compiled() -> int:
        """Number of graphs dynamo has compiled so far (0 without --compile)."""
        if not args.compile:
            return 0
        from torch._dynamo.utils import counters
        return int(counters["stats"]["unique_graphs"])

    rss_steady = rss_now_mib()
    rss_steady_hw = maxrss_mib()
    print(f"rss: high-water at start {rss_start_hw:.0f} MiB, steady (model+inputs) {rss_steady:.0f} MiB, "
          f"high-water before steps {rss_steady_hw:.0f} MiB")

    warmup_times = []
    for i in range(args.warmup):
        t0 = time.perf_counter()
        loss = step()
        warmup_times.append(time.perf_counter() - t0)
        print(f"warmup {i}: {warmup_times[-1]:.3f} s  loss={loss:.4f}")
    graphs_before_timed = graphs_compiled()
    times = []
    for i in range(args.repeats):
        t0 = time.perf_counter()
        loss = step()
        dt = time.perf_counter() - t0
        times.append(dt)
        print(f"step {i}: {dt:.3f} s  loss={loss:.4f}  {tokens / dt:.1f} tok/s  {step_flops / dt / 1e9:.1f} GFLOP/s")
    med = statistics.median(times)
    peak = maxrss_mib()
    recompiled = graphs_compiled() - graphs_before_timed
    # The first warm-up step carries the compilation; what it took beyond a steady step is the
    # compile cost (plus first-run effects, which eager runs show as well, so a rough figure).
    compile_s = max(0.0, warmup_times[0] - med) if args.compile and warmup_times else 0.0
    if args.compile:
        print(f"compile: ~{compile_s:.1f} s (first warm-up step {warmup_times[0]:.1f} s minus the median step); "
              f"{graphs_before_timed} graph(s) compiled in warm-up, {recompiled} during the timed steps")
        if recompiled:
            print("WARNING: torch.compile compiled graphs during the timed steps; raise --warmup")
    print(f"median {med:.3f} s/step  {tokens / med:.1f} tokens/s  {step_flops / med / 1e9:.2f} GFLOP/s  "
          f"(min {min(times):.3f} max {max(times):.3f})")
    print(f"rss: peak {peak:.0f} MiB, peak - steady = {peak - rss_steady:.0f} MiB, now {rss_now_mib():.0f} MiB")

    prof_top = None
    if args.profile:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            step()
        avgs = prof.key_averages()
        total_us = sum(e.self_cpu_time_total for e in avgs)
        top = sorted(avgs, key=lambda e: e.self_cpu_time_total, reverse=True)[:15]
        print(f"profile (one step, self CPU total {total_us / 1e3:.1f} ms; profiler overhead included):")
        print(f"  {'op':<60s} {'self ms':>10s} {'%':>6s} {'calls':>6s}")
        prof_top = []
        for e in top:
            pct = 100.0 * e.self_cpu_time_total / total_us if total_us else 0.0
            print(f"  {e.key[:60]:<60s} {e.self_cpu_time_total / 1e3:10.1f} {pct:6.1f} {e.count:6d}")
            prof_top.append({"op": e.key, "self_ms": round(e.self_cpu_time_total / 1e3, 2), "pct": round(pct, 2)})

    result = {
        "impl": "pytorch-compile" if args.compile else "pytorch-eager",
        "precision": args.precision,
        "compile": args.compile,
        "compile_s": round(compile_s, 3),
        "threads": torch.get_num_threads(),
        "tokens_per_step": tokens,
        "median_s": round(med, 6),
        "tokens_per_s": round(tokens / med, 3),
        "gflops": round(step_flops / med / 1e9, 3),
        "peak_rss_mib": round(peak, 1),
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "attn": args.attn,
        "train_step": args.train_step,
        "steady_rss_mib": round(rss_steady, 1),
        "peak_minus_steady_mib": round(peak - rss_steady, 1),
        "flops_per_token": fl["total"],
        "step_times_s": [round(t, 6) for t in times],
        "warmup_times_s": [round(t, 6) for t in warmup_times],
        "recompiled_in_timed": recompiled,
        "config": {"arch": args.arch, "layers": args.layers, "hidden": args.hidden, "heads": args.heads, "kv_heads": args.kv_heads,
                   "head_dim": args.head_dim, "intermediate": args.intermediate, "vocab": args.vocab,
                   "tied": not args.untied, "batch": args.batch, "seq": args.seq},
    }
    if prof_top is not None:
        result["profile_top"] = prof_top
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
