#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora into fuzz/corpus/<target>/ (committed; run again only to
change them). Pure standard library, written from the format specs (ggml/docs/gguf.md, the
safetensors README), not from our C++ writers, so the seeds do not inherit their mistakes.

Each corpus holds a few small valid inputs and the malformed cases the Catch2 tests exercise
(truncation, bad magic, unsupported version, absurd counts, another architecture, no
tokenizer, a shape whose buffers pass 2^32)."""
import json
import os
import random
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
from gpt2_bytes import bytes_to_unicode  # noqa: E402

rng = random.Random(11)


BYTE_CHARS = bytes_to_unicode()

# --- GGUF ---------------------------------------------------------------------------------------
F32, F16, Q4_0, Q8_0 = 0, 1, 2, 8


def gstr(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def kv_u32(k, v): return gstr(k) + struct.pack("<II", 4, v)
def kv_f32(k, v): return gstr(k) + struct.pack("<If", 6, v)
def kv_str(k, v): return gstr(k) + struct.pack("<I", 8) + gstr(v)


def kv_str_array(k, items):
    return gstr(k) + struct.pack("<IIQ", 9, 8, len(items)) + b"".join(gstr(s) for s in items)


def kv_i32_array(k, items):
    return gstr(k) + struct.pack("<IIQ", 9, 5, len(items)) + b"".join(struct.pack("<i", x) for x in items)


def tensor_bytes(ttype, ne):
    n = 1
    for d in ne:
        n *= d
    if ttype == F32:
        return b"".join(struct.pack("<f", rng.uniform(-0.5, 0.5)) for _ in range(n))
    if ttype == F16:
        return b"".join(struct.pack("<e", rng.uniform(-0.5, 0.5)) for _ in range(n))
    out = b""
    for _ in range(n // 32):  # blocks: f16 scale + 32 int8 (Q8_0) or 16 nibble bytes (Q4_0)
        out += struct.pack("<e", 0.01)
        out += bytes(rng.randrange(256) for _ in range(32 if ttype == Q8_0 else 16))
    return out


def gguf(kvs, tensors, version=3, alignment=32):
    """tensors: [(name, ggml type, ne list)]"""
    head = struct.pack("<IIQQ", 0x46554747, version, len(tensors), len(kvs)) + b"".join(kvs)
    data = b""
    infos = b""
    for name, ttype, ne in tensors:
        while len(data) % alignment:
            data += b"\0"
        infos += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        infos += struct.pack("<IQ", ttype, len(data))
        data += tensor_bytes(ttype, ne)
    out = head + infos
    while len(out) % alignment:
        out += b"\0"
    return out + data


def gpt2_gguf(n_vocab=258, n_ctx=8, C=32, H=2, L=1, F=32, mtype=Q4_0, arch="gpt2",
              tokenizer=True):
    kvs = [kv_str("general.architecture", arch), kv_u32(arch + ".context_length", n_ctx),
           kv_u32(arch + ".embedding_length", C), kv_u32(arch + ".feed_forward_length", F),
           kv_u32(arch + ".block_count", L), kv_u32(arch + ".attention.head_count", H),
           kv_f32(arch + ".attention.layer_norm_epsilon", 1e-5)]
    if tokenizer:
        tokens = [BYTE_CHARS[b] for b in range(256)]
        merges = ["Ġ t", "h e"][: max(0, n_vocab - 256)]
        tokens += [m.replace(" ", "") for m in merges]
        tokens = tokens[:n_vocab]
        kvs += [kv_str("tokenizer.ggml.model", "gpt2"), kv_str_array("tokenizer.ggml.tokens", tokens),
                kv_str_array("tokenizer.ggml.merges", merges),
                kv_i32_array("tokenizer.ggml.token_type", [1] * len(tokens))]
    t = [("token_embd.weight", mtype, [C, n_vocab]), ("position_embd.weight", F32, [C, n_ctx])]
    for l in range(L):
        p = "blk.%d." % l
        t += [(p + "attn_norm.weight", F32, [C]), (p + "attn_norm.bias", F32, [C]),
              (p + "attn_qkv.weight", mtype, [C, 3 * C]), (p + "attn_qkv.bias", F32, [3 * C]),
              (p + "attn_output.weight", mtype, [C, C]), (p + "attn_output.bias", F32, [C]),
              (p + "ffn_norm.weight", F32, [C]), (p + "ffn_norm.bias", F32, [C]),
              (p + "ffn_up.weight", mtype, [C, F]), (p + "ffn_up.bias", F32, [F]),
              (p + "ffn_down.weight", mtype, [F, C]), (p + "ffn_down.bias", F32, [C])]
    t += [("output_norm.weight", F32, [C]), ("output_norm.bias", F32, [C])]
    return gguf(kvs, t)


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


valid = gpt2_gguf()
write("gguf_model_fuzzer", "tiny_q4_0.gguf", valid)
write("gguf_model_fuzzer", "tiny_q8_0.gguf", gpt2_gguf(mtype=Q8_0, n_vocab=257))
write("gguf_model_fuzzer", "tiny_f16_2layers.gguf", gpt2_gguf(mtype=F16, L=2, n_vocab=256, C=32, F=32, n_ctx=4))
write("gguf_model_fuzzer", "no_tokenizer.gguf", gpt2_gguf(tokenizer=False))
write("gguf_model_fuzzer", "llama_arch.gguf", gpt2_gguf(arch="llama"))
write("gguf_model_fuzzer", "truncated.gguf", valid[: len(valid) * 2 // 3])
write("gguf_model_fuzzer", "bad_magic.gguf", b"GGML" + valid[4:200])
write("gguf_model_fuzzer", "version1.gguf", valid[:4] + struct.pack("<I", 1) + valid[8:200])
write("gguf_model_fuzzer", "absurd_counts.gguf", struct.pack("<IIQQ", 0x46554747, 3, 1 << 60, 1 << 60))
# n_ctx * n_ff = 2^32 (wraps in a 32-bit size_t); the tensors that would need to match are
# missing, so this is the metadata path only (a complete file is 10 MB: too big for a seed).
write("gguf_model_fuzzer", "wrapping_sizes.gguf",
      gguf([kv_str("general.architecture", "gpt2"), kv_u32("gpt2.context_length", 65536),
            kv_u32("gpt2.embedding_length", 32), kv_u32("gpt2.feed_forward_length", 65536),
            kv_u32("gpt2.block_count", 1), kv_u32("gpt2.attention.head_count", 1)],
           [("token_embd.weight", Q4_0, [32, 4])]))

# --- safetensors + config.json ---------------------------------------------------------------


def safetensors(entries, metadata=None):
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    data = b""
    for name, shape in entries:
        n = 1
        for d in shape:
            n *= d
        b = b"".join(struct.pack("<f", rng.uniform(-0.5, 0.5)) for _ in range(n))
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


def hf_checkpoint(V=8, P=4, C=32, L=1, prefix="", mask=True):
    e = [(prefix + "wte.weight", [V, C]), (prefix + "wpe.weight", [P, C])]
    for l in range(L):
        p = prefix + "h.%d." % l
        e += [(p + "ln_1.weight", [C]), (p + "ln_1.bias", [C]),
              (p + "attn.c_attn.weight", [C, 3 * C]), (p + "attn.c_attn.bias", [3 * C]),
              (p + "attn.c_proj.weight", [C, C]), (p + "attn.c_proj.bias", [C]),
              (p + "ln_2.weight", [C]), (p + "ln_2.bias", [C]),
              (p + "mlp.c_fc.weight", [C, 4 * C]), (p + "mlp.c_fc.bias", [4 * C]),
              (p + "mlp.c_proj.weight", [4 * C, C]), (p + "mlp.c_proj.bias", [C])]
        if mask:
            e += [(p + "attn.bias", [1, 1, P, P])]
    e += [(prefix + "ln_f.weight", [C]), (prefix + "ln_f.bias", [C])]
    return safetensors(e, {"format": "pt"})


def hf_config(V=8, P=4, C=32, H=2, L=1):
    return json.dumps({"activation_function": "gelu_new", "model_type": "gpt2", "n_ctx": P,
                       "n_embd": C, "n_head": H, "n_inner": None, "n_layer": L, "n_positions": P,
                       "layer_norm_epsilon": 1e-5, "vocab_size": V}).encode()


def convert_input(config, st):
    return struct.pack("<H", len(config)) + config + st


write("safetensors_convert_fuzzer", "tiny_quantizable.bin", convert_input(hf_config(), hf_checkpoint()))
# Rows of 8 cannot be block-quantized: the converter falls back to F16 (and the seeds stay small).
ck = hf_checkpoint(C=8)
write("safetensors_convert_fuzzer", "tiny.bin", convert_input(hf_config(C=8), ck))
write("safetensors_convert_fuzzer", "tiny_prefixed.bin",
      convert_input(hf_config(C=8), hf_checkpoint(C=8, prefix="transformer.", mask=False)))
write("safetensors_convert_fuzzer", "shape_mismatch.bin", convert_input(hf_config(V=9), ck))
write("safetensors_convert_fuzzer", "llama_config.bin", convert_input(b'{"model_type": "llama"}', ck))
write("safetensors_convert_fuzzer", "truncated.bin", convert_input(hf_config(), ck[: len(ck) // 2]))
write("safetensors_convert_fuzzer", "huge_header_length.bin",
      convert_input(hf_config(), struct.pack("<Q", 1 << 62) + b"{}"))
overlap = b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}'
write("safetensors_convert_fuzzer", "overlapping.bin",
      convert_input(hf_config(), struct.pack("<Q", len(overlap)) + overlap + bytes(16)))

# --- tokenizer: mode byte 0 = text, 1 = ids ----------------------------------------------------
texts = ["Hello world", " it's 2026!\n\n  tabs\tand\r\nlines", "naïve café 日本語 🤖 𝕏",
         "<|endoftext|> special as text", "\xff\xfe invalid utf-8 \xc3", "   ", "'s'll'd 123,456.7"]
for i, t in enumerate(texts):
    raw = t.encode("latin-1") if i == 4 else t.encode("utf-8")
    write("tokenizer_fuzzer", "text%d" % i, b"\x00" + raw)
write("tokenizer_fuzzer", "ids_gpt2", b"\x01" + struct.pack("<6i", 15496, 995, 50256, 0, 255, 220))
write("tokenizer_fuzzer", "ids_out_of_range", b"\x01" + struct.pack("<4i", -1, 50257, 2**31 - 1, -2**31))

# --- SAE cfg.json + sae_weights.safetensors (sae_convert_fuzzer) ---------------------------------


def sae_cfg(layout, arch="standard", d_in=32, d_sae=4, k=2, norm="none", hook="blocks.0.hook_resid_pre"):
    cfg = {"architecture": arch, "d_in": d_in, "d_sae": d_sae, "apply_b_dec_to_input": True,
           "normalize_activations": norm}
    if layout == "saelens6":
        cfg["metadata"] = {"hook_name": hook, "hook_head_index": None}
        if arch == "topk":
            cfg["k"] = k
    elif layout == "legacy":
        cfg["hook_name"] = hook
        if arch == "topk":
            cfg["activation_fn_kwargs"] = {"k": k}
    else:
        cfg["hook_point"] = hook
    return json.dumps(cfg).encode()


def sae_weights(d_in=32, d_sae=4, jump=False):
    e = [("W_enc", [d_in, d_sae]), ("b_enc", [d_sae]), ("W_dec", [d_sae, d_in]), ("b_dec", [d_in])]
    if jump:
        e.append(("threshold", [d_sae]))
    return safetensors(e)


write("sae_convert_fuzzer", "standard_jb.bin", convert_input(sae_cfg("jb"), sae_weights()))
write("sae_convert_fuzzer", "jumprelu_saelens6.bin",
      convert_input(sae_cfg("saelens6", "jumprelu", hook="blocks.3.hook_resid_post"), sae_weights(jump=True)))
write("sae_convert_fuzzer", "topk_legacy.bin",
      convert_input(sae_cfg("legacy", "topk", hook="blocks.1.hook_attn_out"), sae_weights()))
write("sae_convert_fuzzer", "topk_saelens6_layer_norm.bin",
      convert_input(sae_cfg("saelens6", "topk", norm="layer_norm", hook="blocks.2.hook_mlp_out"), sae_weights()))
write("sae_convert_fuzzer", "f16_fallback.bin", convert_input(sae_cfg("jb", d_in=8), sae_weights(d_in=8)))
write("sae_convert_fuzzer", "gated.bin", convert_input(sae_cfg("jb", "gated"), sae_weights()))
write("sae_convert_fuzzer", "hook_z.bin", convert_input(sae_cfg("jb", hook="blocks.0.attn.hook_z"), sae_weights()))
write("sae_convert_fuzzer", "shape_mismatch.bin", convert_input(sae_cfg("jb", d_sae=5), sae_weights()))
write("sae_convert_fuzzer", "missing_threshold.bin", convert_input(sae_cfg("saelens6", "jumprelu"), sae_weights()))

# --- transcoder sae.json + sae.safetensors (transcoder_fuzzer) --------------------------------


def tc_json(**keys):
    cfg = {"d_in": 32, "d_out": 32, "d_sae": 4, "is_transcoder": True,
           "hook_point": "blocks.1.ln2.hook_normalized", "out_hook_point": "blocks.1.hook_mlp_out"}
    cfg.update(keys)
    return json.dumps(cfg).encode()


write("transcoder_fuzzer", "block1.bin", convert_input(tc_json(), sae_weights()))
write("transcoder_fuzzer", "no_json.bin", convert_input(b"", sae_weights()))
write("transcoder_fuzzer", "f16_fallback.bin", convert_input(tc_json(d_in=8, d_out=8), sae_weights(d_in=8)))
write("transcoder_fuzzer", "other_block.bin", convert_input(tc_json(hook_point="blocks.0.ln2.hook_normalized"),
                                                            sae_weights()))
write("transcoder_fuzzer", "shape_mismatch.bin", convert_input(tc_json(d_sae=5), sae_weights()))
write("transcoder_fuzzer", "threshold.bin", convert_input(tc_json(), sae_weights(jump=True)))

# --- dashboard corpora (corpus_fuzzer): [format | piece << 1][max line / 8][context - 1]
# [max_tokens] then the file ------------------------------------------------------------------


def corpus_input(jsonl, text, piece=5, max_line=0, context=16, max_tokens=0):
    return bytes([(1 if jsonl else 0) | ((piece - 1) << 1), max_line, context - 1, max_tokens]) + text


write("corpus_fuzzer", "txt.bin", corpus_input(False, "The fox.\nIt runs.\n<|endoftext|>\nA dog\r\n"
                                                      "<|endoftext|>\r\n\n<|endoftext|>\nlast".encode()))
write("corpus_fuzzer", "jsonl.bin", corpus_input(True, (json.dumps({"text": "caf\u00e9 \U0001F642\n\"x\""}) + "\n\n" +
                                                        json.dumps({"id": 2, "text": "second"}) + "\r\n").encode()))
write("corpus_fuzzer", "jsonl_escapes.bin",
      corpus_input(True, b'{"text": "\\u00e9\\ud83d\\ude42\\t\\\\ \\/ \\b\\f\\r"}\n{"text": ""}\n', piece=1))
write("corpus_fuzzer", "broken_utf8.bin", corpus_input(False, b"\xff\xfe\xc3(\xe2\x82\n<|endoftext|>\n\xf0\x9f\x99"))
write("corpus_fuzzer", "broken_utf8_jsonl.bin", corpus_input(True, b'{"text": "\xff\xc3("}\n'))
write("corpus_fuzzer", "long_line.bin", corpus_input(True, b'{"text": "' + b"a" * 300 + b'"}\n', max_line=16))
write("corpus_fuzzer", "malformed.bin", corpus_input(True, b'{"text": "a"}\n[1]\n{"text": 3}\n{"text": "\\ud83d"}\n'))
write("corpus_fuzzer", "max_tokens.bin", corpus_input(False, b"one two three four five six seven eight",
                                                      context=3, max_tokens=5))
