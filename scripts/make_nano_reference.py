#!/usr/bin/python3
"""Converts the llm-viz nano GPT (a trained minGPT that sorts 3-symbol sequences) to GGUF, and its
recorded activations to the golden format, for tests/model/nano_test.cc.

Source (../shared/reference/llm-viz-nano, from bbycroft/llm-viz public/):
  gpt-nano-sort-model.json        config + tensors {shape, dtype, data: base64 little-endian f32}
  gpt-nano-sort-t0-partials.json  one forward pass over a batch idx [3, 11], every intermediate
These activations come from the llm-viz authors' PyTorch run, not from us, so they check our
activation capture from the outside.

Outputs (run from the repository root; plain python3 + numpy):
  tests/data/nano_sort.gguf            GGUF v3, F32, architecture "gpt2" named as llama.cpp does
  tests/data/nano_sort_partials.bin    the first sequence of the batch, golden format (see
                                       scripts/make_golden.py), names as src/model/observer.h

Layout notes:
  * minGPT uses nn.Linear, whose weight is [out, in]: already ggml's row layout (ne = {in, out}),
    so unlike Hugging Face's Conv1D ([in, out]) nothing is transposed. Checked below: c_attn is
    [144, 48] = [3C, C].
  * lm_head is a separate, untied matrix -> `output.weight`.
  * transformer.h.N.attn.bias is minGPT's causal mask buffer, not a parameter: dropped (as
    convert_hf_to_gguf.py drops .attn.bias).
  * The partials' per-block tensors (ln1, q, ..., mlpResid) are those of block 0 only; block0..2
    are every block's output (resid_out). att is the scaled, masked scores; attSm the probs;
    y the concatenated heads; yProj the output projection; fc/gelu/mlp the MLP.
"""

import argparse
import base64
import json
import os
import struct
import sys

import numpy as np

REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared",
                         "reference", "llm-viz-nano")
LN_EPS = 1e-5  # minGPT's nn.LayerNorm default


def load_tensors(path):
    raw = json.load(open(path))
    config = raw.pop("config")
    tensors = {}
    for name, t in raw.items():
        assert t["dtype"] == "torch.float32", (name, t["dtype"])
        data = np.frombuffer(base64.b64decode(t["data"]), dtype="<f4")
        tensors[name] = data.reshape(t["shape"]).astype(np.float32)
    return config, tensors


# --- A minimal GGUF v3 writer (ggml/docs/gguf.md) ---------------------------------------------
GGUF_U32, GGUF_F32, GGUF_STRING = 4, 6, 8
GGML_TYPE_F32 = 0
ALIGNMENT = 32


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def write_gguf(path, metadata, tensors):
    """metadata: list of (key, type, value); tensors: list of (name, float32 array) in numpy
    order (last axis contiguous), written with ggml ne reversed."""
    out = bytearray()
    out += b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata))
    for key, vtype, value in metadata:
        out += gguf_string(key) + struct.pack("<I", vtype)
        if vtype == GGUF_U32:
            out += struct.pack("<I", value)
        elif vtype == GGUF_F32:
            out += struct.pack("<f", value)
        elif vtype == GGUF_STRING:
            out += gguf_string(value)
        else:
            raise ValueError(vtype)
    offset = 0
    blobs = []
    for name, array in tensors:
        array = np.ascontiguousarray(array, dtype="<f4")
        ne = list(reversed(array.shape))
        out += gguf_string(name) + struct.pack("<I", len(ne))
        out += struct.pack(f"<{len(ne)}Q", *ne)
        out += struct.pack("<IQ", GGML_TYPE_F32, offset)
        blob = array.tobytes()
        blobs.append(blob)
        offset += (len(blob) + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
    out += b"\0" * (-len(out) % ALIGNMENT)
    for blob in blobs:
        out += blob + b"\0" * (-len(blob) % ALIGNMENT)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(out)
    os.replace(tmp, path)


def write_golden(path, records):
    """records: list of (name, array) with float32 or int32 arrays; format in make_golden.py."""
    with open(path, "wb") as f:
        f.write(b"GPT2GOLD" + struct.pack("<II", 1, len(records)))
        for name, array in records:
            array = np.ascontiguousarray(array)
            dtype = {np.dtype(np.float32): 0, np.dtype(np.int32): 1}[array.dtype]
            encoded = name.encode("utf-8")
            f.write(struct.pack("<I", len(encoded)) + encoded)
            f.write(struct.pack("<II", dtype, array.ndim))
            f.write(struct.pack(f"<{array.ndim}q", *array.shape))
            f.write(array.astype(array.dtype.newbyteorder("<")).tobytes())


# --- A numpy GPT-2 forward, only to confirm the layout reading above -------------------------
def layer_norm(x, g, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + LN_EPS) * g + b


def numpy_forward(cfg, w, ids):
    C, H = cfg["n_embd"], cfg["n_head"]
    D = C // H
    T = len(ids)
    x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][:T]
    obs = {"embed": x}
    for l in range(cfg["n_layer"]):
        p = f"transformer.h.{l}."
        h = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"])
        qkv = h @ w[p + "attn.c_attn.weight"].T + w[p + "attn.c_attn.bias"]  # Linear: [out, in]
        q, k, v = (qkv[:, i * C:(i + 1) * C].reshape(T, H, D).transpose(1, 0, 2) for i in range(3))
        s = q @ k.transpose(0, 2, 1) / np.sqrt(D)
        s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
        pr = np.exp(s - s.max(-1, keepdims=True))
        pr /= pr.sum(-1, keepdims=True)
        y = (pr @ v).transpose(1, 0, 2).reshape(T, C)
        x = x + y @ w[p + "attn.c_proj.weight"].T + w[p + "attn.c_proj.bias"]
        h = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"])
        f = h @ w[p + "mlp.c_fc.weight"].T + w[p + "mlp.c_fc.bias"]
        f = 0.5 * f * (1 + np.tanh(np.sqrt(2 / np.pi) * (f + 0.044715 * f ** 3)))
        x = x + f @ w[p + "mlp.c_proj.weight"].T + w[p + "mlp.c_proj.bias"]
        obs[f"blk{l}/resid_out"] = x
    h = layer_norm(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"])
    obs["logits"] = h @ w["lm_head.weight"].T
    return obs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", default=REFERENCE)
    parser.add_argument("--out-dir", default="tests/data")
    args = parser.parse_args()

    cfg, w = load_tensors(os.path.join(args.reference, "gpt-nano-sort-model.json"))
    pcfg, partials = load_tensors(os.path.join(args.reference, "gpt-nano-sort-t0-partials.json"))
    C, H, L = cfg["n_embd"], cfg["n_head"], cfg["n_layer"]
    V, n_ctx, F = cfg["vocab_size"], cfg["block_size"], 4 * cfg["n_embd"]
    assert w["transformer.h.0.attn.c_attn.weight"].shape == (3 * C, C), "expected nn.Linear [out, in]"
    assert w["transformer.h.0.mlp.c_fc.weight"].shape == (F, C)
    assert w["lm_head.weight"].shape == (V, C)

    metadata = [
        ("general.architecture", GGUF_STRING, "gpt2"),
        ("general.name", GGUF_STRING, "llm-viz nano sort"),
        ("gpt2.block_count", GGUF_U32, L),
        ("gpt2.context_length", GGUF_U32, n_ctx),
        ("gpt2.embedding_length", GGUF_U32, C),
        ("gpt2.feed_forward_length", GGUF_U32, F),
        ("gpt2.attention.head_count", GGUF_U32, H),
        ("gpt2.attention.layer_norm_epsilon", GGUF_F32, LN_EPS),
        ("general.file_type", GGUF_U32, 0),  # ALL_F32
    ]
    tensors = [("token_embd.weight", w["transformer.wte.weight"]),
               ("position_embd.weight", w["transformer.wpe.weight"])]
    for l in range(L):
        p, g = f"transformer.h.{l}.", f"blk.{l}."
        for src, dst in [("ln_1.weight", "attn_norm.weight"), ("ln_1.bias", "attn_norm.bias"),
                         ("attn.c_attn.weight", "attn_qkv.weight"),
                         ("attn.c_attn.bias", "attn_qkv.bias"),
                         ("attn.c_proj.weight", "attn_output.weight"),
                         ("attn.c_proj.bias", "attn_output.bias"),
                         ("ln_2.weight", "ffn_norm.weight"), ("ln_2.bias", "ffn_norm.bias"),
                         ("mlp.c_fc.weight", "ffn_up.weight"), ("mlp.c_fc.bias", "ffn_up.bias"),
                         ("mlp.c_proj.weight", "ffn_down.weight"),
                         ("mlp.c_proj.bias", "ffn_down.bias")]:
            tensors.append((g + dst, w[p + src]))
    tensors += [("output_norm.weight", w["transformer.ln_f.weight"]),
                ("output_norm.bias", w["transformer.ln_f.bias"]),
                ("output.weight", w["lm_head.weight"])]

    # Batch element 0 of the recorded pass.
    b = 0
    ids = partials["idx"][b].astype(np.int32)
    records = [("ids", ids), ("embed", partials["x"][b])]
    per_block0 = [("ln1", "ln1"), ("q", "q"), ("k", "k"), ("v", "v"), ("attn_scores", "att"),
                  ("attn_probs", "attSm"), ("attn_heads", "y"), ("attn_out", "yProj"),
                  ("resid_attn", "attnResid"), ("ln2", "ln2"), ("mlp_pre", "fc"),
                  ("mlp_act", "gelu"), ("mlp_out", "mlp"), ("resid_out", "mlpResid")]
    for ours, theirs in per_block0:
        records.append(("blk0/" + ours, partials[theirs][b]))
    for l in range(1, L):
        records.append((f"blk{l}/resid_out", partials[f"block{l}"][b]))
    records += [("ln_f", partials["ln_f"][b]), ("logits", partials["lm_head"][b]),
                ("probs", partials["probs"][b])]

    # Confirm the reading of the layouts with an independent numpy forward.
    assert np.array_equal(partials["mlpResid"][b], partials["block0"][b])
    check = numpy_forward(cfg, w, ids.astype(np.int64))
    for name in ["embed", "logits"] + [f"blk{l}/resid_out" for l in range(L)]:
        ref = dict(records)[name]
        err = np.abs(check[name] - ref).max()
        print(f"numpy vs recorded {name}: max abs diff {err:.3g}", file=sys.stderr)
        assert err < 1e-4, name

    os.makedirs(args.out_dir, exist_ok=True)
    write_gguf(os.path.join(args.out_dir, "nano_sort.gguf"), metadata, tensors)
    write_golden(os.path.join(args.out_dir, "nano_sort_partials.bin"), records)
    print(f"wrote nano_sort.gguf ({len(tensors)} tensors) and nano_sort_partials.bin "
          f"({len(records)} records); ids {ids.tolist()}", file=sys.stderr)


if __name__ == "__main__":
    main()
