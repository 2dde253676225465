#!/usr/bin/env python3
"""Writes tests/fixtures/quant/quant.safetensors: what bitsandbytes' quantization functions (the
formats QLoRA uses) make of a few seeded weights, for titan's quantize op
(tests/ops/quant_test.cpp compares bit for bit).

  python3 tools/make_quant_fixtures.py            (from the repository root; bitsandbytes >= 0.45)

For each case k (shapes with a partial last NF4 block, a row of zeros, bf16 inputs, values on a
code's midpoint):
  w<k>           F32 or BF16, the weight [O, I]
  nf4_codes<k>   U8 [ceil(O I / 2)]: bitsandbytes.functional.quantize_4bit(w, blocksize=64,
                 quant_type="nf4") packed codes (the even element in the high nibble)
  nf4_absmax<k>  F32 [ceil(O I / 64)]: its per-block absmax
  nf4_deq<k>     F32 [O, I]: bitsandbytes' reference dequantization (backends/default
                 _dequantize_4bit_compute: code value x its block's absmax, in float32). Its CPU
                 kernel (dequantize_4bit on a CPU tensor) blocks each row apart when I is not a
                 multiple of 64, unlike quantize_4bit and the CUDA kernels, which block the
                 flattened weight: the reference is the format
  int8_codes<k>  I8 [O, I]: bitsandbytes.functional.int8_vectorwise_quant(w) (per output row)
  int8_scale<k>  F32 [O]: its row absmax
  int8_deq<k>    F32 [O, I]: int8_vectorwise_dequant(codes, scale)
"""
import os

import torch
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "quant")


def main():
    import bitsandbytes.functional as F
    torch.manual_seed(11)
    torch.set_num_threads(1)
    code = F.get_4bit_type("nf4", device="cpu") if hasattr(F, "get_4bit_type") else None
    cases = []
    cases.append(torch.randn(8, 64) * 0.02)                 # whole blocks
    cases.append(torch.randn(5, 27))                        # 135 elements: a partial last block, odd count
    w = torch.randn(4, 96) * 3.0
    w[2] = 0.0                                              # a row (and blocks) of zeros
    cases.append(w)
    cases.append((torch.randn(6, 80) * 0.05).bfloat16())    # bf16 input, as a published folder stores it
    if code is not None:                                    # exactly on the midpoints between codes
        mids = ((code[:-1] + code[1:]) / 2).float()         # (absmax 2: w / absmax is the midpoint itself)
        row = torch.cat([mids, -mids, torch.tensor([1.0, -1.0])]) * 2.0
        cases.append(torch.cat([row, row]).reshape(1, 64).clone())
    out = {}
    for k, w in enumerate(cases):
        q, state = F.quantize_4bit(w, blocksize=64, quant_type="nf4")
        from bitsandbytes.backends.default.ops import _dequantize_4bit_compute
        deq = _dequantize_4bit_compute(q.reshape(-1), state.absmax, state.code, 64, w.shape, torch.float32)
        iq, scale, _ = F.int8_vectorwise_quant(w.float().clone())
        ideq = F.int8_vectorwise_dequant(iq, scale).float()
        out[f"w{k}"] = w.contiguous()
        out[f"nf4_codes{k}"] = q.reshape(-1).contiguous()
        out[f"nf4_absmax{k}"] = state.absmax.float().contiguous()
        out[f"nf4_deq{k}"] = deq.reshape(w.shape).contiguous()
        out[f"int8_codes{k}"] = iq.contiguous()
        out[f"int8_scale{k}"] = scale.float().contiguous()
        out[f"int8_deq{k}"] = ideq.contiguous()
    os.makedirs(OUT, exist_ok=True)
    save_file(out, os.path.join(OUT, "quant.safetensors"))
    import bitsandbytes
    print("bitsandbytes", bitsandbytes.__version__, "torch", torch.__version__, len(cases), "cases")


if __name__ == "__main__":
    main()
