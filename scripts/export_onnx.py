#!/usr/bin/python3
"""A GPT-2 GGUF (F32) as ONNX, fp32 and int8, for issue 51's peer: ONNX Runtime Web.

The peer is what transformers.js runs: ONNX Runtime Web's wasm backend over a GPT-2 exported from
PyTorch, its "q8" variant made by ONNX Runtime's dynamic quantizer. This script makes both from
the SAME weights as our bench model (scripts/node-engine.mjs benchModel(): gpt2-make-model's
synthetic GPT-2-small-shaped GGUF), so speed and accuracy compare like for like:

  fp32  GPT-2 written from torch ops (F.layer_norm, GELU tanh, softmax with a causal mask, as
        Hugging Face GPT2LMHeadModel), exported by torch.onnx.export (opset 17), one graph for
        prefill and decode, as optimum exports decoder_model with past:
          inputs   input_ids int64 [1, T]; past_key_values.L.key / .value f32 [1, H, P, D]
                   (P = 0 for a prompt: empty tensors, as transformers.js feeds its first call)
          outputs  logits f32 [1, V] (the last position's only); present.L.key / .value
                   f32 [1, H, P + T, D] (the past concatenated with this call's, each step)
        The LM head is its own initializer [C, V] (the tied token embedding transposed), so it is
        a MatMul the quantizer sees, as in optimum's exports.
  int8  the fp32 graph rewritten as onnxruntime.quantization.quantize_dynamic(per_channel=True,
        weight_type=QInt8) rewrites it (onnxruntime/python/tools/quantization: MatMulInteger in
        operators/matmul.py, GatherQuant in operators/gather.py), here with python3-onnx alone
        because Debian has no onnxruntime Python package:
          MatMul(A, B const [K, N]) ->
            DynamicQuantizeLinear(A) -> A_u8, A_scale, A_zp   (per tensor, uint8, asymmetric)
            MatMulInteger(A_u8, B_i8, A_zp, B_zp)            (B per column: symmetric int8,
                                                              scale = max|B[:, n]| / 127,
                                                              zero point 0, round half to even)
            Cast(int32 -> float) * (A_scale * B_scale)
          Gather(table const, ids) -> Gather(table_u8, ids) -> DequantizeLinear (the embedding
            tables quantized as GatherQuant does, through quantize_activation: per tensor,
            uint8, asymmetric over [min(0, lo), max(0, hi)])
        Biases, LayerNorm, softmax and attention stay f32, as the quantizer leaves them.
        Written from the quantizer's rules (quant_utils.compute_scale_zp, get_qmin_qmax_for_qType,
        WeightSymmetric's default for QInt8), not compared byte for byte with its output: that
        needs the onnxruntime wheel, which this machine has no source for.

Deterministic: the same GGUF gives the same bytes (no random state; torch.onnx.export's node
names are stable for a fixed torch). Needs Debian's python3-torch, python3-onnx, python3-numpy
(/usr/bin/python3). tests/web/onnx-export.test.mjs runs it on a tiny model where torch is
installed (skipped otherwise); scripts/bench-ort.mjs runs it on demand into build/ort/:

    /usr/bin/python3 scripts/export_onnx.py --gguf build/bench/family/gpt2-f32.gguf \\
        --fp32 build/ort/gpt2-fp32.onnx --int8 build/ort/gpt2-int8.onnx
"""

import argparse
import os
import struct
import sys

import numpy as np

# --- A GGUF v3 reader for F32 tensors (ggml/docs/gguf.md) -----------------------------------

_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
           11: "<q", 12: "<d"}


def read_gguf(path):
    """(metadata dict, {name: np.float32 array shaped [ne[-1], ..., ne[0]]}) of an F32 GGUF."""
    data = open(path, "rb").read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, data, pos)[0]
        pos += struct.calcsize(fmt)
        return v

    def string():
        nonlocal pos
        n = take("<Q")
        s = data[pos:pos + n].decode("utf-8")
        pos += n
        return s

    def value(vtype):
        if vtype == 8:
            return string()
        if vtype == 9:
            inner, n = take("<I"), take("<Q")
            return [value(inner) for _ in range(n)]
        if vtype not in _SCALAR:
            raise ValueError(f"{path}: metadata value type {vtype} unknown")
        return take(_SCALAR[vtype])

    if data[:4] != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    pos = 4
    version = take("<I")
    if version != 3:
        raise ValueError(f"{path}: GGUF version {version}, only 3 is read")
    n_tensors, n_kv = take("<Q"), take("<Q")
    meta = {}
    for _ in range(n_kv):
        key = string()
        meta[key] = value(take("<I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        ne = [take("<Q") for _ in range(take("<I"))]
        ggml_type, offset = take("<I"), take("<Q")
        infos.append((name, ne, ggml_type, offset))
    align = meta.get("general.alignment", 32)
    base = (pos + align - 1) // align * align
    tensors = {}
    for name, ne, ggml_type, offset in infos:
        if ggml_type != 0:
            raise ValueError(f"{path}: tensor {name} is ggml type {ggml_type}; export from the F32 "
                             "model (gpt2-make-model --type f32)")
        count = int(np.prod(ne))
        start = base + offset
        if start + 4 * count > len(data):
            raise ValueError(f"{path}: tensor {name} runs past the end of the file")
        tensors[name] = np.frombuffer(data, "<f4", count, start).reshape(ne[::-1]).copy()
    return meta, tensors


# --- GPT-2 in torch ops, with past keys and values --------------------------------------------


def build_module(meta, t):
    import torch
    import torch.nn.functional as F

    n_layer = meta["gpt2.block_count"]
    n_head = meta["gpt2.attention.head_count"]
    eps = meta.get("gpt2.attention.layer_norm_epsilon", 1e-5)
    wte = t["token_embd.weight"]  # [V, C]
    C = wte.shape[1]
    D = C // n_head

    class Gpt2(torch.nn.Module):

        def __init__(self):
            super().__init__()
            p = lambda a: torch.nn.Parameter(torch.from_numpy(np.ascontiguousarray(a)),
                                             requires_grad=False)
            self.wte = p(wte)
            self.wpe = p(t["position_embd.weight"])  # [n_ctx, C]
            # GGUF matrices are [out, in] (ggml ne = [in, out]); F.linear takes them as they are.
            self.blocks = []
            for l in range(n_layer):
                b = {k: p(t[f"blk.{l}.{k}"]) for k in (
                    "attn_norm.weight", "attn_norm.bias", "attn_qkv.weight", "attn_qkv.bias",
                    "attn_output.weight", "attn_output.bias", "ffn_norm.weight", "ffn_norm.bias",
                    "ffn_up.weight", "ffn_up.bias", "ffn_down.weight", "ffn_down.bias")}
                for k, v in b.items():
                    self.register_parameter(f"b{l}_" + k.replace(".", "_"), v)
                self.blocks.append(b)
            self.ln_f_g = p(t["output_norm.weight"])
            self.ln_f_b = p(t["output_norm.bias"])
            head = t["output.weight"] if "output.weight" in t else wte
            self.lm_head = p(head.T)  # [C, V]: a MatMul of its own, as optimum exports it

        def forward(self, input_ids, *past):
            # [1, T, C] throughout: with a batch axis torch exports F.linear as MatMul + Add (a
            # 2-D input would make it Gemm, which the dynamic quantizer leaves in f32).
            T = input_ids.shape[1]
            P = past[0].shape[2]
            positions = torch.arange(T, dtype=torch.int64) + P
            x = F.embedding(input_ids, self.wte) + F.embedding(positions, self.wpe).unsqueeze(0)
            query_pos = positions.unsqueeze(1)  # [T, 1]
            presents = []
            for l, b in enumerate(self.blocks):
                h = F.layer_norm(x, (C,), b["attn_norm.weight"], b["attn_norm.bias"], eps)
                qkv = F.linear(h, b["attn_qkv.weight"], b["attn_qkv.bias"])  # [1, T, 3C]
                q, k, v = qkv.split(C, dim=2)
                heads = lambda a: a.reshape(1, T, n_head, D).transpose(1, 2)  # [1, H, T, D]
                k = torch.cat([past[2 * l], heads(k)], dim=2)  # [1, H, P + T, D]
                v = torch.cat([past[2 * l + 1], heads(v)], dim=2)
                presents += [k, v]
                scores = heads(q) @ k.transpose(2, 3) / float(np.sqrt(D))  # [1, H, T, P + T]
                # key j is visible to the query at position P + i when j <= P + i
                key_pos = torch.arange(k.shape[2], dtype=torch.int64).unsqueeze(0)  # [1, P + T]
                scores = scores.masked_fill(key_pos > query_pos, float("-inf"))
                a = torch.softmax(scores, dim=-1) @ v  # [1, H, T, D]
                a = a.transpose(1, 2).reshape(1, T, C)
                x = x + F.linear(a, b["attn_output.weight"], b["attn_output.bias"])
                h = F.layer_norm(x, (C,), b["ffn_norm.weight"], b["ffn_norm.bias"], eps)
                h = F.gelu(F.linear(h, b["ffn_up.weight"], b["ffn_up.bias"]), approximate="tanh")
                x = x + F.linear(h, b["ffn_down.weight"], b["ffn_down.bias"])
            last = F.layer_norm(x[:, -1], (C,), self.ln_f_g, self.ln_f_b, eps)  # [1, C]
            return (torch.matmul(last.unsqueeze(1), self.lm_head).squeeze(1), *presents)

    return Gpt2(), n_layer, n_head, D


def export_fp32(meta, tensors, path):
    import torch

    module, n_layer, n_head, D = build_module(meta, tensors)
    names = [f"past_key_values.{l}.{kv}" for l in range(n_layer) for kv in ("key", "value")]
    presents = [n.replace("past_key_values", "present") for n in names]
    # Traced with a past of 3 and a prompt of 2, so neither length is folded into a constant.
    ids = torch.tensor([[1, 2]], dtype=torch.int64)
    past = [torch.zeros(1, n_head, 3, D) for _ in names]
    axes = {"input_ids": {1: "tokens"}}
    axes.update({n: {2: "past"} for n in names})
    axes.update({n: {2: "total"} for n in presents})
    with torch.no_grad():
        torch.onnx.export(module, (ids, *past), path, input_names=["input_ids", *names],
                          output_names=["logits", *presents], dynamic_axes=axes, opset_version=17,
                          do_constant_folding=True)


# --- ONNX Runtime's dynamic quantization, rewritten with python3-onnx -------------------------


def quantize_dynamic_int8(src, dst):
    import onnx
    from onnx import helper, numpy_helper, TensorProto

    model = onnx.load(src)
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    uses = {}
    for node in graph.node:
        for name in node.input:
            uses[name] = uses.get(name, 0) + 1
    new_nodes, new_inits, dropped = [], [], set()
    counts = {"MatMul": 0, "Gather": 0}

    for node in graph.node:
        weight = node.input[1] if node.op_type == "MatMul" else (
            node.input[0] if node.op_type == "Gather" else None)
        w = inits.get(weight) if weight else None
        if w is None or w.data_type != TensorProto.FLOAT or len(w.dims) != 2:
            new_nodes.append(node)
            continue
        a = numpy_helper.to_array(w).astype(np.float32)
        n = f"{weight}_{counts[node.op_type]}"
        if uses[weight] == 1:
            dropped.add(weight)
        counts[node.op_type] += 1
        if node.op_type == "MatMul":
            # quant_utils.compute_scale_zp(symmetric=True) for each column of B, qrange [-127, 127]
            absmax = np.abs(a).max(axis=0)
            scale = np.where(absmax > 0, absmax / 127.0, 1.0).astype(np.float32)  # [N]
            q = np.clip(np.rint(a / scale), -127, 127).astype(np.int8)
            new_inits += [numpy_helper.from_array(q, n + "_quantized"),
                          numpy_helper.from_array(scale, n + "_scale"),
                          numpy_helper.from_array(np.zeros(a.shape[1], np.int8), n + "_zero_point")]
            x, out = node.input[0], node.output[0]
            new_nodes += [
                helper.make_node("DynamicQuantizeLinear", [x],
                                 [n + "_a_u8", n + "_a_scale", n + "_a_zp"], name=n + "_quant"),
                helper.make_node("MatMulInteger", [n + "_a_u8", n + "_quantized", n + "_a_zp",
                                                   n + "_zero_point"], [n + "_i32"],
                                 name=n + "_MatMulInteger"),
                helper.make_node("Cast", [n + "_i32"], [n + "_f32"], to=TensorProto.FLOAT,
                                 name=n + "_cast"),
                helper.make_node("Mul", [n + "_a_scale", n + "_scale"], [n + "_scales"],
                                 name=n + "_scales_mul"),
                helper.make_node("Mul", [n + "_f32", n + "_scales"], [out], name=n + "_mul"),
            ]
        else:
            # quant_utils.compute_scale_zp for uint8 over the whole table, 0 kept exact
            lo, hi = min(0.0, float(a.min())), max(0.0, float(a.max()))
            scale = np.float32((hi - lo) / 255.0 if hi > lo else 1.0)
            zp = np.uint8(np.clip(np.rint(-lo / scale), 0, 255))
            q = np.clip(np.rint(a / scale) + zp, 0, 255).astype(np.uint8)
            new_inits += [numpy_helper.from_array(q, n + "_quantized"),
                          numpy_helper.from_array(np.array(scale), n + "_scale"),
                          numpy_helper.from_array(np.array(zp), n + "_zero_point")]
            new_nodes += [
                helper.make_node("Gather", [n + "_quantized", node.input[1]], [n + "_u8"],
                                 name=n + "_Gather", **{a.name: helper.get_attribute_value(a)
                                                        for a in node.attribute}),
                helper.make_node("DequantizeLinear", [n + "_u8", n + "_scale", n + "_zero_point"],
                                 [node.output[0]], name=n + "_dequant"),
            ]

    kept = [i for i in graph.initializer if i.name not in dropped]
    del graph.initializer[:]
    graph.initializer.extend(kept + new_inits)
    del graph.node[:]
    graph.node.extend(new_nodes)
    if not any(o.domain in ("", "ai.onnx") and o.version >= 11 for o in model.opset_import):
        raise ValueError("the fp32 graph's opset is below 11 (DynamicQuantizeLinear)")
    onnx.checker.check_model(model)
    onnx.save(model, dst)
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gguf", required=True, help="an F32 GPT-2 GGUF (gpt2-make-model --type f32)")
    ap.add_argument("--fp32", required=True, help="the fp32 ONNX file to write")
    ap.add_argument("--int8", help="the int8 ONNX file to write (from the fp32 one)")
    args = ap.parse_args()
    meta, tensors = read_gguf(args.gguf)
    if meta.get("general.architecture") != "gpt2":
        sys.exit(f"{args.gguf}: architecture {meta.get('general.architecture')!r}, not gpt2")
    for path in (args.fp32, args.int8):
        if path:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    export_fp32(meta, tensors, args.fp32 + ".tmp")
    os.replace(args.fp32 + ".tmp", args.fp32)
    print(f"wrote {args.fp32} ({os.path.getsize(args.fp32) / 1e6:.1f} MB)")
    if args.int8:
        counts = quantize_dynamic_int8(args.fp32, args.int8 + ".tmp")
        os.replace(args.int8 + ".tmp", args.int8)
        print(f"wrote {args.int8} ({os.path.getsize(args.int8) / 1e6:.1f} MB): {counts['MatMul']} "
              f"MatMul as MatMulInteger, {counts['Gather']} Gather tables as uint8")


if __name__ == "__main__":
    main()
