#!/usr/bin/env python3
"""GGUF import / export fixtures (issue 51): tiny Hugging Face models, what llama.cpp's converter writes
for them, what llama.cpp computes on those GGUFs, and quantized-type / Q4_K model references.

Usage (from the repository root; needs tools/build_llama_driver.sh run first):

  python3 tools/make_gguf_fixtures.py --out tests/fixtures/gguf [--work /tmp/gguf_work] [--only CASE ...]
      [--llama-dir DIR] [--driver PATH]

Writes under --out (every expected value comes from llama.cpp, the gguf package or Transformers; none
from titan):

  <case>/hf/                 a tiny seeded random model, Transformers save_pretrained (config.json,
                             model.safetensors, fp32, generation_config.json with eos 1023) plus
                             tests/fixtures/tokenizer/trained/tokenizer.json and a tokenizer_config.json
                             (chat template)
  <case>/reference_<t>.json  for t in f32, f16, bf16, q8_0: what llama.cpp's convert_hf_to_gguf.py writes for
                             <case>/hf with --outtype t, read back with gguf.GGUFReader:
                             {"gguf_version", "alignment", "metadata": [[key, value type, value], ...],
                              "tensors": [[name, ggml type, [ne0, ne1, ...], sha256 of the data bytes], ...]}
                             (arrays as {"array_of", "len", "values"} or, past 32 elements,
                             {"array_of", "len", "sha256"}: sha256 of json.dumps(list, ensure_ascii=False,
                             separators=(",", ":")) in UTF-8). The GGUFs themselves stay in --work.
  <case>/llama_<t>.json      for t in the case's list in CASES (f32; q8_0, bf16 on some): llama.cpp (tools/llama_driver.cpp) on
                             that GGUF for PROMPTS: the ids it tokenized, the logits of every prompt
                             position (float32, full vocab) and 8 greedy tokens.
  quant_types/quant_types.gguf, quant_types/dequant.safetensors
                             one [3 rows, 512] tensor per ggml type of QUANT_TYPES, written with
                             gguf.GGUFWriter, and gguf.quants.dequantize of each as float32 [3, 512].
  q4k_model/model.gguf       a qwen3 GGUF (hidden 256, 1 layer, tied embeddings) whose 2-D linear weights are
                             random valid Q4_K blocks, token_embd Q6_K, norms F32; metadata (tokenizer and
                             hyperparameters) copied from a converter run of the matching HF folder.
  (--work)/q4k_dequant_hf/   that model dequantized (gguf.quants.dequantize), named back with the inverse of
                             gguf's TensorNameMap, loaded into Qwen3ForCausalLM and save_pretrained.
  q4k_model/expected.json    Transformers' float64 logits (as float32) of dequant_hf for ids [[1..16]].

The converter is run with its tokenizer.ggml.pre detection (TextModel.get_vocab_base_pre, which hashes the
tokenization of a fixed text and knows only published tokenizers) patched to return "qwen2": the fixture
tokenizer is a 1,024-token byte-level BPE with Qwen2's pre-tokenizer regex. --model-name titan-gguf-<case>
fixes general.name (otherwise the folder name "hf"). Qwen3.5 is converted with --no-mtp (the converter
asserts on a Qwen3.5 checkpoint without MTP tensors otherwise).

Also printed (not written): for each f32 GGUF, the largest |llama.cpp - Transformers| logit difference on the
prompts' ids, and a cross-check of gguf.quants.dequantize against ggml's own to_float (via ctypes on
libggml-base from --llama-build).

Versions used for the committed files: llama.cpp commit 0c1e570 (vendored in llama-cpp-python 0.3.36),
gguf 0.19.0 (PyPI, for GGUFReader / GGUFWriter / quants; the converter uses the vendored gguf-py),
transformers 5.25.0, torch 2.15.0, safetensors 0.8.0, tokenizers 0.23.3, numpy 2.4.6.
"""
from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch
import transformers
import gguf
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader, GGUFValueType, GGUFWriter
from safetensors.numpy import save_file as save_numpy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_env import setup_torch  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKENIZER = os.path.join(REPO, "tests/fixtures/tokenizer/trained/tokenizer.json")
DEFAULT_LLAMA_DIR = "/tmp/lcp/llama_cpp_python-0.3.36/vendor/llama.cpp"
DEFAULT_LLAMA_BUILD = "/tmp/llama_build"

PROMPTS = ["To be, or not to be", "First Citizen:\nBefore we proceed", "ROMEO:"]
N_PREDICT = 8
OUTTYPES = ["f32", "f16", "bf16", "q8_0"]
EOS = 1023
# only <|endoftext|> is a special token: the markers are plain text
CHAT_TEMPLATE = ("{% for message in messages %}{{ '### ' + message['role'] + '\\n' + message['content'] + eos_token + '\\n' }}"
                 "{% endfor %}{% if add_generation_prompt %}{{ '### assistant\\n' }}{% endif %}")

BASE = dict(vocab_size=1024, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, max_position_embeddings=256, rms_norm_eps=1e-6, hidden_act="silu",
            bos_token_id=EOS, eos_token_id=EOS, pad_token_id=EOS)
# name -> (architecture, config class, config, seed, converter arguments, llama.cpp outtypes); each seed is the one
# of 13 tried whose Transformers float64 greedy continuations of PROMPTS have the widest smallest top-1 / top-2 gap
CASES = {
    "qwen3": ("Qwen3ForCausalLM", "Qwen3Config",
              dict(BASE, tie_word_embeddings=False, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
              104, [], ["f32", "q8_0", "bf16"]),
    # 4 experts of width 32: the dense cases' MLP width (128) in total
    "qwen3_moe": ("Qwen3MoeForCausalLM", "Qwen3MoeConfig",
                  dict(BASE, tie_word_embeddings=True, num_experts=4, num_experts_per_tok=2, norm_topk_prob=True,
                       moe_intermediate_size=32, decoder_sparse_step=1, mlp_only_layers=[],
                       rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
                  107, [], ["f32", "q8_0"]),
    # llama3 rope scaling over head_dim 16, theta 1e4, original context 256: of the 8 frequencies 3 are kept
    # (wavelength < 64), 4 divided by 8 (> 256) and one interpolated
    "llama": ("LlamaForCausalLM", "LlamaConfig",
              dict(BASE, tie_word_embeddings=True,
                   rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 256}),
              108, [], ["f32", "q8_0"]),
    "mistral": ("MistralForCausalLM", "MistralConfig",
                dict(BASE, tie_word_embeddings=False, sliding_window=None,
                     rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
                102, [], ["f32"]),
    "qwen2": ("Qwen2ForCausalLM", "Qwen2Config",
              dict({k: v for k, v in BASE.items() if k != "head_dim"}, tie_word_embeddings=True,
                   rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
              111, [], ["f32"]),
    # layer_types [linear, full]; gated DeltaNet 2 key heads x 16, 4 value heads x 16, conv kernel 4;
    # full attention with its output gate, partial_rotary_factor 0.25 (4 rotated lanes)
    "qwen3_5": ("Qwen3_5ForCausalLM", "Qwen3_5TextConfig",
                dict(BASE, tie_word_embeddings=True, layer_types=["linear_attention", "full_attention"],
                     full_attention_interval=2, linear_num_key_heads=2, linear_key_head_dim=16,
                     linear_num_value_heads=4, linear_value_head_dim=16, linear_conv_kernel_dim=4,
                     rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                                      "mrope_section": [1, 1, 0], "mrope_interleaved": True}),
                102, ["--no-mtp"], []),
}

QUANT_TYPES = [QT.F32, QT.F16, QT.BF16, QT.Q8_0, QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1, QT.Q4_K, QT.Q5_K, QT.Q6_K]
Q4K_CONFIG = dict(vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=1, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=64, max_position_embeddings=256, rms_norm_eps=1e-6,
                  hidden_act="silu", tie_word_embeddings=True, bos_token_id=EOS, eos_token_id=EOS, pad_token_id=EOS,
                  rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
Q4K_IDS = list(range(1, 17))


# ----------------------------------------------------------------------------------------------- HF folders

def write_tokenizer_files(folder: str) -> None:
    shutil.copyfile(TOKENIZER, os.path.join(folder, "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": None, "eos_token": "<|endoftext|>",
              "pad_token": "<|endoftext|>", "unk_token": None, "add_bos_token": False, "add_eos_token": False,
              "model_max_length": 256, "clean_up_tokenization_spaces": False, "chat_template": CHAT_TEMPLATE}
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    with open(os.path.join(folder, "generation_config.json"), "w", encoding="utf-8") as f:
        json.dump({"bos_token_id": EOS, "eos_token_id": EOS, "pad_token_id": EOS,
                   "transformers_version": transformers.__version__}, f, indent=2)
        f.write("\n")


def randomize(model, seed: int, zero_centred_norms: bool) -> None:
    """Every parameter from one seeded stream: matrices and biases N(0, 0.1^2), norms around their neutral
    value (1 + N(0, 0.1^2), or N(0, 0.1^2) for Qwen3.5's x * (1 + w) norms), Qwen3.5's A_log / dt_bias as
    tools/make_qwen3_5_fixtures.py draws them."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("A_log"):
                p.copy_(torch.log(torch.empty(p.shape).uniform_(1.0, 16.0, generator=gen)))
            elif name.endswith("dt_bias") or name.endswith("linear_attn.norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith("norm.weight") or name.endswith("layernorm.weight"):
                base = 0.0 if zero_centred_norms else 1.0
                p.copy_(base + 0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))


def make_hf(case: str, folder: str) -> None:
    arch, config_cls, config, seed, _, _ = CASES[case]
    if config_cls == "Qwen3_5TextConfig":
        from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig as cls
    else:
        cls = getattr(transformers, config_cls)
    torch.manual_seed(seed)
    model = getattr(transformers, arch)(cls(**config)).float().eval()
    randomize(model, seed, zero_centred_norms=(case == "qwen3_5"))
    shutil.rmtree(folder, ignore_errors=True)
    model.save_pretrained(folder)
    write_tokenizer_files(folder)


# ----------------------------------------------------------------------------------------------- converter

CONVERT = r"""
import runpy, sys
llama_dir = sys.argv[1]
sys.path.insert(0, llama_dir + "/gguf-py")
sys.path.insert(0, llama_dir)
import conversion.base
# the fixture tokenizer is unknown to the converter's hash table; it uses Qwen2's pre-tokenizer regex
conversion.base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "qwen2"
sys.argv = [llama_dir + "/convert_hf_to_gguf.py"] + sys.argv[2:]
runpy.run_path(llama_dir + "/convert_hf_to_gguf.py", run_name="__main__")
"""


def convert(llama_dir: str, hf_dir: str, outtype: str, out_path: str, name: str, extra: list[str]) -> None:
    cmd = [sys.executable, "-c", CONVERT, llama_dir, hf_dir, "--outtype", outtype, "--outfile", out_path,
           "--model-name", name] + extra
    env = dict(os.environ, PYTHONHASHSEED="0")
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        sys.stderr.write(res.stdout + res.stderr)
        raise SystemExit(f"convert_hf_to_gguf failed for {hf_dir} {outtype}")


# ----------------------------------------------------------------------------------------------- GGUF -> JSON

def json_list_sha256(values: list) -> str:
    return hashlib.sha256(json.dumps(values, ensure_ascii=False, separators=(",", ":")).encode("utf-8")).hexdigest()


def field_value(field):
    main = field.types[0]
    if main == GGUFValueType.ARRAY:
        values = field.contents()
        elem = field.types[-1].name
        if len(values) > 32:
            return {"array_of": elem, "len": len(values), "sha256": json_list_sha256(values)}
        return {"array_of": elem, "len": len(values), "values": values}
    return field.contents()


def reference(path: str) -> dict:
    reader = GGUFReader(path)
    metadata = []
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue  # the reader's pseudo-fields for the header
        metadata.append([key, field.types[0].name, field_value(field)])
    tensors = []
    for t in reader.tensors:
        raw = bytes(reader.data[t.data_offset:t.data_offset + t.n_bytes])
        tensors.append([t.name, QT(t.tensor_type).name, [int(x) for x in t.shape], hashlib.sha256(raw).hexdigest()])
    version = int(reader.fields["GGUF.version"].contents())
    return {"gguf_version": version, "alignment": int(reader.alignment), "metadata": metadata, "tensors": tensors}


def write_reference(ref: dict, path: str) -> None:
    """One metadata entry / tensor per line."""
    lines = ["{", f'  "gguf_version": {ref["gguf_version"]},', f'  "alignment": {ref["alignment"]},', '  "metadata": [']
    lines += ["    " + json.dumps(m, ensure_ascii=False) + ("," if i + 1 < len(ref["metadata"]) else "")
              for i, m in enumerate(ref["metadata"])]
    lines += ["  ],", '  "tensors": [']
    lines += ["    " + json.dumps(t) + ("," if i + 1 < len(ref["tensors"]) else "") for i, t in enumerate(ref["tensors"])]
    lines += ["  ]", "}"]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


# ----------------------------------------------------------------------------------------------- llama.cpp

def f32_text(v) -> str:
    """The shortest decimal text that reads back to the same float32."""
    s = str(np.float32(v))
    if s in ("inf", "-inf", "nan"):
        raise ValueError("non-finite value")
    return s


def run_driver(driver: str, gguf_path: str, prompts: list[str], work: str) -> dict:
    prompts_file = os.path.join(work, "prompts.json")
    with open(prompts_file, "w", encoding="utf-8") as f:
        json.dump(prompts, f)
    res = subprocess.run([driver, gguf_path, str(N_PREDICT), "--prompts-file", prompts_file],
                         capture_output=True, text=True)
    if res.returncode != 0:
        sys.stderr.write(res.stderr)
        raise SystemExit(f"llama_driver failed on {gguf_path}")
    return json.loads(res.stdout)


def write_llama(out: dict, path: str, gguf_name: str, llama_commit: str) -> None:
    head = {"gguf": gguf_name, "llama_cpp": llama_commit, "llama_version": out["llama_version"],
            "add_bos": out["add_bos"], "add_eos": out["add_eos"], "n_vocab": out["n_vocab"], "kv_type": out["kv_type"],
            "n_predict": N_PREDICT}
    lines = ["{"] + [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()] + ['  "prompts": [']
    for i, p in enumerate(out["prompts"]):
        lines.append("    {" + f'"text": {json.dumps(p["text"], ensure_ascii=False)}, "ids": {json.dumps(p["ids"])}, '
                     f'"greedy": {json.dumps(p["greedy"])}, '
                     f'"greedy_gap": [{",".join(f32_text(v) for v in p["greedy_gap"])}], "logits": [')
        rows = p["logits"]
        for r, row in enumerate(rows):
            lines.append("      [" + ",".join(f32_text(v) for v in row) + "]" + ("," if r + 1 < len(rows) else ""))
        lines.append("    ]}" + ("," if i + 1 < len(out["prompts"]) else ""))
    lines += ["  ]", "}"]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def hf_check(hf_dir: str, out: dict) -> tuple[float, float, bool]:
    """Largest |llama.cpp - Transformers (float64)| logit difference over the prompts, the smallest
    top-1 / top-2 gap of llama.cpp's greedy steps, and whether Transformers' float64 argmax over the prompt and
    llama.cpp's greedy tokens picks the same tokens."""
    model = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float64,
                                                              attn_implementation="eager").eval()
    model.config._experts_implementation = "eager"  # the per-expert loop (grouped_mm has no float64)
    worst, gap, same = 0.0, float("inf"), True
    for p in out["prompts"]:
        n = len(p["ids"])
        with torch.no_grad():
            ref = model(input_ids=torch.tensor([p["ids"] + p["greedy"][:-1]])).logits[0]
        got = torch.tensor(p["logits"], dtype=torch.float64)
        worst = max(worst, (got - ref[:n]).abs().max().item())
        gap = min(gap, min(p["greedy_gap"]))
        same = same and ref[n - 1:].argmax(-1).tolist() == p["greedy"]
    return worst, gap, same


# ----------------------------------------------------------------------------------------------- quantized types

def random_k_blocks(qtype: QT, n_blocks: int, rng: np.random.Generator, d_range=(-0.1, 0.1),
                    dmin_range=(-0.1, 0.1)) -> np.ndarray:
    """Random block bytes of a K type whose f16 scales (d, and dmin where the type has one) are finite."""
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    d = rng.uniform(*d_range, size=n_blocks).astype(np.float16).view(np.uint8).reshape(n_blocks, 2)
    if qtype in (QT.Q4_K, QT.Q5_K):  # d, dmin first
        dmin = rng.uniform(*dmin_range, size=n_blocks).astype(np.float16).view(np.uint8).reshape(n_blocks, 2)
        blocks[:, 0:2] = d
        blocks[:, 2:4] = dmin
    elif qtype == QT.Q6_K:  # ql[128], qh[64], scales[16], d
        blocks[:, type_size - 2:] = d
    else:
        raise ValueError(qtype)
    return blocks


def quantized_rows(qtype: QT, rows: int, cols: int, rng: np.random.Generator) -> np.ndarray:
    if qtype in (QT.Q4_K, QT.Q5_K, QT.Q6_K):
        block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
        return random_k_blocks(qtype, rows * cols // block_size, rng).reshape(rows, cols // block_size * type_size)
    values = rng.standard_normal((rows, cols)).astype(np.float32)
    return gguf.quants.quantize(values, qtype)


def ggml_to_float(lib, qtype: QT, raw: bytes, n: int) -> np.ndarray:
    class Traits(ctypes.Structure):
        _fields_ = [("type_name", ctypes.c_char_p), ("blck_size", ctypes.c_int64),
                    ("blck_size_interleave", ctypes.c_int64), ("type_size", ctypes.c_size_t),
                    ("is_quantized", ctypes.c_bool), ("to_float", ctypes.c_void_p), ("from_float_ref", ctypes.c_void_p)]
    lib.ggml_get_type_traits.restype = ctypes.POINTER(Traits)
    traits = lib.ggml_get_type_traits(int(qtype)).contents
    out = np.zeros(n, dtype=np.float32)
    if qtype == QT.F32:
        return np.frombuffer(raw, dtype=np.float32).copy()
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(traits.to_float)
    buf = ctypes.create_string_buffer(raw, len(raw))
    fn(ctypes.cast(buf, ctypes.c_void_p), out.ctypes.data_as(ctypes.c_void_p), n)
    return out


def make_quant_types(folder: str, llama_build: str) -> None:
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(51)
    path = os.path.join(folder, "quant_types.gguf")
    writer = GGUFWriter(path, "quant_types")
    for qtype in QUANT_TYPES:
        data = quantized_rows(qtype, 3, 512, rng)
        writer.add_tensor(qtype.name.lower(), data, raw_dtype=None if qtype == QT.F32 else qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    reader = GGUFReader(path)
    out = {}
    lib = None
    libpath = os.path.join(llama_build, "bin", "libggml-base.so")
    if os.path.exists(libpath):
        lib = ctypes.CDLL(libpath)
    for t in reader.tensors:
        qtype = QT(t.tensor_type)
        assert [int(x) for x in t.shape] == [512, 3], (t.name, t.shape)
        values = gguf.quants.dequantize(t.data, qtype).astype(np.float32).reshape(3, 512)
        assert np.isfinite(values).all(), t.name
        out[t.name] = np.ascontiguousarray(values)
        if lib is not None:
            raw = bytes(reader.data[t.data_offset:t.data_offset + t.n_bytes])
            ref = ggml_to_float(lib, qtype, raw, 3 * 512).reshape(3, 512)
            same = np.array_equal(ref.view(np.uint32), values.view(np.uint32))
            print(f"  quant_types {t.name}: gguf.quants == ggml to_float bit for bit: {same}; "
                  f"max |value| {np.abs(values).max():.4g}")
    save_numpy(out, os.path.join(folder, "dequant.safetensors"))


# ----------------------------------------------------------------------------------------------- Q4_K model

def copy_field(writer: GGUFWriter, key: str, field) -> None:
    main = field.types[0]
    if main == GGUFValueType.ARRAY:
        writer.add_key_value(key, field.contents(), main, sub_type=field.types[-1])
    else:
        writer.add_key_value(key, field.contents(), main)


def make_q4k_model(folder: str, work: str, llama_dir: str, driver: str | None) -> None:
    from transformers import Qwen3Config, Qwen3ForCausalLM
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    # a matching HF folder, converted, for the metadata and the tensor order / shapes
    src = os.path.join(work, "q4k_src")
    torch.manual_seed(17)
    model = Qwen3ForCausalLM(Qwen3Config(**Q4K_CONFIG)).float().eval()
    shutil.rmtree(src, ignore_errors=True)
    model.save_pretrained(src)
    write_tokenizer_files(src)
    src_gguf = os.path.join(work, "q4k_src-f32.gguf")
    convert(llama_dir, src, "f32", src_gguf, "titan-gguf-q4k-model", [])
    reader = GGUFReader(src_gguf)

    path = os.path.join(folder, "model.gguf")
    writer = GGUFWriter(path, "qwen3")  # writes general.architecture first, as the converter does
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        if key == "general.file_type":
            writer.add_file_type(int(gguf.LlamaFileType.MOSTLY_Q4_K_M))
            continue
        copy_field(writer, key, field)

    rng = np.random.default_rng(52)
    for t in reader.tensors:
        ne = [int(x) for x in t.shape]
        if len(ne) == 1:
            writer.add_tensor(t.name, (1.0 + 0.1 * rng.standard_normal(ne[0])).astype(np.float32))
            continue
        qtype = QT.Q6_K if t.name == "token_embd.weight" else QT.Q4_K
        block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
        rows, cols = ne[1], ne[0]
        if qtype == QT.Q6_K:  # d * scale * (q - 32): std about 1300 d
            blocks = random_k_blocks(qtype, rows * cols // block_size, rng, d_range=(2e-5, 8e-5))
        else:  # d * scale * q - dmin * m
            blocks = random_k_blocks(qtype, rows * cols // block_size, rng, d_range=(1e-4, 3e-4),
                                     dmin_range=(1e-3, 2e-3))
        writer.add_tensor(t.name, blocks.reshape(rows, cols // block_size * type_size), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    # dequantize and name back (the inverse of gguf's Qwen3 TensorNameMap over the HF model's names)
    out_reader = GGUFReader(path)
    name_map = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN3, Q4K_CONFIG["num_hidden_layers"])
    hf_names = {}
    for hf_name in model.state_dict():
        gg = name_map.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if gg is not None:
            hf_names[gg] = hf_name
    state = {}
    for t in out_reader.tensors:
        qtype = QT(t.tensor_type)
        ne = [int(x) for x in t.shape]
        values = gguf.quants.dequantize(t.data, qtype).astype(np.float32).reshape(list(reversed(ne)))
        state[hf_names[t.name]] = torch.from_numpy(np.ascontiguousarray(values))
    dq = Qwen3ForCausalLM(Qwen3Config(**Q4K_CONFIG)).float().eval()
    missing, unexpected = dq.load_state_dict(state, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
    dq.tie_weights()
    assert torch.equal(dq.lm_head.weight, state["model.embed_tokens.weight"])
    hf_out = os.path.join(work, "q4k_dequant_hf")  # not committed: 3.4 MB of f32; expected.json holds its logits
    dq.save_pretrained(hf_out)
    for name in ("generation_config.json",):
        if os.path.exists(os.path.join(hf_out, name)):
            os.remove(os.path.join(hf_out, name))

    ref = transformers.AutoModelForCausalLM.from_pretrained(hf_out, dtype=torch.float64,
                                                            attn_implementation="eager").eval()
    for name, p in ref.state_dict().items():
        assert torch.equal(p.float(), state[name if name in state else "model.embed_tokens.weight"]), name
    with torch.no_grad():
        logits = ref(input_ids=torch.tensor([Q4K_IDS])).logits[0].float().numpy()
    lines = ["{", f'  "input_ids": [{json.dumps(Q4K_IDS)}],', '  "dtype": "float64 forward, float32 logits",',
             f'  "transformers": {json.dumps(transformers.__version__)}, "torch": {json.dumps(torch.__version__)},',
             '  "logits": [[']
    lines += ["    [" + ",".join(f32_text(v) for v in row) + "]" + ("," if r + 1 < len(logits) else "")
              for r, row in enumerate(logits)]
    lines += ["  ]]", "}"]
    with open(os.path.join(folder, "expected.json"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print(f"  q4k_model: logits std {logits.std():.3f}, max |logit| {np.abs(logits).max():.3f}")

    if driver:  # llama.cpp on the same GGUF (it quantizes activations to Q8_K for Q4_K / Q6_K dot products)
        res = subprocess.run([driver, path, "1", "--ids", ",".join(map(str, Q4K_IDS))], capture_output=True, text=True)
        if res.returncode != 0:
            sys.stderr.write(res.stderr)
            raise SystemExit("llama_driver failed on the Q4_K model")
        got = np.array(json.loads(res.stdout)["prompts"][0]["logits"], dtype=np.float64)
        print(f"  q4k_model: llama.cpp vs Transformers max |diff| {np.abs(got - logits).max():.3g} "
              f"(max |logit| {np.abs(logits).max():.3g})")


# ----------------------------------------------------------------------------------------------- main

def llama_commit(llama_dir: str) -> str:
    try:
        return subprocess.run(["git", "-C", llama_dir, "rev-parse", "--short=7", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except Exception:
        return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "tests/fixtures/gguf"))
    ap.add_argument("--work", default="/tmp/gguf_work", help="converted GGUFs and scratch (not committed)")
    ap.add_argument("--llama-dir", default=os.environ.get("LLAMA_DIR", DEFAULT_LLAMA_DIR))
    ap.add_argument("--llama-build", default=os.environ.get("LLAMA_BUILD", DEFAULT_LLAMA_BUILD))
    ap.add_argument("--driver", default=None, help="default: <llama-build>/bin/llama_driver")
    ap.add_argument("--only", nargs="*", default=None,
                    help="subset of: " + " ".join(list(CASES) + ["quant_types", "q4k_model"]))
    args = ap.parse_args()
    setup_torch(1)
    driver = args.driver or os.path.join(args.llama_build, "bin", "llama_driver")
    if not os.path.exists(driver):
        raise SystemExit(f"no {driver}: run tools/build_llama_driver.sh")
    commit = llama_commit(args.llama_dir)
    os.makedirs(args.work, exist_ok=True)
    todo = args.only or (list(CASES) + ["quant_types", "q4k_model"])

    for case in [c for c in CASES if c in todo]:
        print(f"{case}:")
        case_dir = os.path.join(args.out, case)
        os.makedirs(case_dir, exist_ok=True)
        hf_dir = os.path.join(case_dir, "hf")
        make_hf(case, hf_dir)
        extra, llama_types = CASES[case][4], CASES[case][5]
        for outtype in OUTTYPES:
            gguf_path = os.path.join(args.work, f"{case}-{outtype}.gguf")
            convert(args.llama_dir, hf_dir, outtype, gguf_path, f"titan-gguf-{case}", extra)
            write_reference(reference(gguf_path), os.path.join(case_dir, f"reference_{outtype}.json"))
            if outtype in llama_types:
                out = run_driver(driver, gguf_path, PROMPTS, args.work)
                write_llama(out, os.path.join(case_dir, f"llama_{outtype}.json"), os.path.basename(gguf_path), commit)
                worst, gap, same = hf_check(hf_dir, out)
                print(f"  {outtype}: ids {[p['ids'] for p in out['prompts']]}; max |llama.cpp - Transformers| "
                      f"{worst:.3g}; smallest greedy top-2 gap {gap:.3g}; Transformers' greedy the same: {same}")
    if "quant_types" in todo:
        print("quant_types:")
        make_quant_types(os.path.join(args.out, "quant_types"), args.llama_build)
    if "q4k_model" in todo:
        print("q4k_model:")
        make_q4k_model(os.path.join(args.out, "q4k_model"), args.work, args.llama_dir, driver)


if __name__ == "__main__":
    main()
