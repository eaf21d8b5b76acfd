#!/usr/bin/python3
"""Golden outputs of the tiny synthetic GPT-2, computed with PyTorch, for tests/model/golden_test.cc.

This is the independent reference for our forward pass: it rebuilds the synthetic weights from
the formula in src/tools/common/synthetic_model.h with numpy (uint64 arithmetic, no C++ of ours),
runs GPT-2 written from torch ops (F.layer_norm, F.linear, F.gelu(approximate="tanh"),
torch.softmax with a causal mask, float32 throughout, as Hugging Face GPT2LMHeadModel and
karpathy/llm.c's train_gpt2.py do) and dumps every tensor src/model/observer.h names
(src/model/hooks.h's table), blkL/resid_pre included.

golden_circuits_heads.bin, same format, head detection (src/lab/head_scores.h) on the same model:
    default_ids            i32 [50] the ids `gpt2 heads` draws without --ids (SplitMix64 seeded 2028,
                                    id = next % (n_vocab - 1), repeats skipped)
    <case>/ids             i32 [R]  the ids repeated: [50256, ids, ids] (cases in HEAD_CASES)
    <case>/prev, <case>/dup, <case>/induction
                           f32 [L, H] the scores (TransformerLens detect_head's definitions, see
                                    head_scores() below) from the attention probabilities

Needs Debian's python3-torch and python3-numpy (/usr/bin/python3). Not run in CI: its outputs,
tests/data/golden_tiny.bin, golden_interventions.bin and golden_path_patch.bin, are committed. Run
from the repository root:
    scripts/make_golden.py [--output tests/data/golden_tiny.bin]
                           [--interventions-output tests/data/golden_interventions.bin]
                           [--heads-output tests/data/golden_circuits_heads.bin]
                           [--path-patch-output tests/data/golden_path_patch.bin]
                           [--gradients-output tests/data/golden_gradients.bin]
                           [--sae-dir tests/data/sae] [--sae-output tests/data/golden_sae.bin]
                           [--only-sae]
                           [--transcoder-dir tests/data/transcoders] [--graph-output tests/data/golden_graph.bin]
                           [--only-graph]
                           [--dashboard-dir tests/data/dashboard] [--dashboard-output tests/data/golden_dashboard.bin]
                           [--only-dashboard]

File format (all little-endian), read by tests/model/golden_file.h:
    8 bytes  magic "GPT2GOLD"
    u32      version (1)
    u32      n_records
    n_records x {
        u32      name_len
        name_len bytes: name (UTF-8, no terminator)
        u32      dtype (0 = float32, 1 = int32)
        u32      n_dims
        i64      dims[n_dims]        (row-major, last dimension contiguous)
        data     prod(dims) * 4 bytes
    }
golden_gradients.bin, same format, torch autograd on prompt p3 (write_gradients()):
    ids, corrupt_ids, patch_source_ids  i32 [T]
    grad/<case>/query      i32 [3]  position, target, contrast (-1: none) of
                                    m = logit[position, target] - logit[position, contrast];
                                    cases "plain", "contrast", those of intervention_cases() and
                                    of gradient_cases() (head patches, frozen attention, SAE
                                    steering and clamping: see write_gradient_cases())
    grad/<case>/metric     f32 [1]
    grad/<case>/embed, ln_f, blkL/<hook>  dm/d(tensor), shapes as the observer's; hooks
                                    resid_pre (the stream entering the block, after patches and
                                    stream edits),
                                    ln1, q, k, v, attn_scores, attn_heads, attn_out, resid_attn,
                                    ln2, mlp_pre, mlp_act, mlp_out, resid_out
    saliency/<grad|ig>/values f32 [T], saliency/<grad|ig>/total_delta f32 [2]  (ig: 16 steps)
    atp/heads f32 [L, H], atp/resid_pre f32 [L, T], atp/metrics f32 [2] (clean, corrupt),
    atp/query i32 [2] (target, contrast) with corrupt_ids as the corrupted prompt
    score/<case>/query     i32 [4]  layer, head, query, key of one attention score s = scaled
                                    q[query] . k[key] before softmax (hook_attn_scores); cases
                                    "plain", "block0", "same" (key = query) and under the
                                    intervention cases "patch", "combined", "post_norm"
    score/<case>/score     f32 [1]  s
    score/<case>/embed     f32 [T, C] ds/d(stream entering block 0)
    score/<case>/resid_pre f32 [layer + 1, T, C] ds/d(blocks.l.hook_resid_pre), l <= layer
    score/<case>/values    f32 [T]  x[p] . ds/dx[p], x = wte[id] + wpe (gradient x input)
    exact/<case>/query     i32 [5]  kind (0: a head's output hook_z at every position, 1: the
                                    stream entering a block at one position), layer, head or
                                    position, target, contrast: what one atp cell estimates, run
                                    exactly: ids with that value from corrupt_ids' run
    exact/<case>/values    f32 [3]  m_patched - m_clean, m_clean, m_patched (last position)
tests/data/sae/<name>/{cfg.json,sae_weights.safetensors} and golden_sae.bin, same format: small
random SAEs in SAELens's layout on this model and SAELens's math on them (write_saes()).
Records:
    config                 i32 [7]  n_vocab, n_ctx, n_embd, n_head, n_layer, n_ff, seed
    checksum/<tensor>      f32 [10] sum, sum of squares (accumulated in float64), then the first
                                    8 values exactly (ggml storage order)
    pN/ids                 i32 [T]  the prompt (N = 1, 2, 3)
    pN/embed, pN/ln_f      f32 [T, C]
    pN/logits              f32 [T, V]
    pN/blkL/<name>         per block L, names and shapes as in src/model/observer.h:
                           ln1, attn_heads, attn_out, resid_attn, ln2, mlp_out, resid_out [T, C];
                           q, k, v [H, T, D]; attn_scores, attn_probs [H, T, T] (scores -inf where
                           masked); mlp_pre, mlp_act [T, F]
    pN/lens_ids            i32 [L, T, 5]  logit lens: top-5 ids of softmax(ln_f(resid_out_L) @ wte^T)
    pN/lens_probs          f32 [L, T, 5]  their probabilities
    p1/greedy              i32 [8]  greedy continuation of prompt 1 (argmax, full recompute)

golden_path_patch.bin, same format, path patching (write_path_patch; src/lab/path_patch.h) of
p3 (clean) against p3 with three tokens changed (corrupt), m = logit[-1, target] - logit[-1,
contrast] (contrast -1: the target's logit alone; target: the clean run's top token):
    clean_ids, corrupt_ids   i32 [T]
    pp/<case>/query          i32 [4]  sender layer, sender head, target, contrast
    pp/<case>/receivers      i32 [1 + 3n]  n, then (layer, head, part 0 q / 1 k / 2 v) each; n = 0: logits
    pp/<case>/values         f32 [3]  m_patched, m_clean, m_corrupt
    sweep/<name>/query       i32 [2]  target, contrast
    sweep/<name>/receivers   as above
    sweep/<name>/values      f32 [L * H]  m_patched - m_clean, every head as the sender, layer-major

golden_interventions.bin, same format, prompt p3 under the interventions of
src/model/run_options.h (cases in intervention_cases(): heads 0.1 and 1.3 zero- and
mean-ablated (means over the clean run's positions), skip attn 1, skip mlp 0, no residual 1,
post-norm, patch of the stream entering block 1 at position 3 with p2's, and a combination):
    ids, patch_source_ids  i32 [T]
    iv/<case>/logits       f32 [V]  logits of the last position
    iv/<case>/blkL/resid_out f32 [T, C]
    attr/<case>/query      i32 [3]  position, target, contrast (-1: none)
    attr/<case>/values     f32 [n]  direct logit attribution in `gpt2 attribute`'s order: embed,
                                    per block L: heads L.0..L.(H-1), attn_bias.L, mlp.L; then
                                    ln_f_bias, and last the logit (difference) itself

tests/data/transcoders/gpt2-small-dun-chl-mlp-tc<L>/{sae.json,sae.safetensors} (L = 0, 1) and
golden_graph.bin, same format (write_graph()): random per-block transcoders in the public GPT-2
small set's layout (W_enc [C, F], b_enc [F], W_dec [F, C], b_dec [C]; input the bare LayerNorm of
blocks.L.hook_resid_mid, output standing in for blocks.L.hook_mlp_out) and the attribution graph
of GRAPH_PROMPT (circuit-tracer's definition, src/graph/graph.h) by float64 autograd through the
replacement model (attention patterns and every LayerNorm's 1/sigma frozen, MLP outputs constant
with an injection leaf where they add), every target's incoming edges one torch.autograd.grad:
    graph/ids              i32 [T]   [50256] + the prompt
    graph/features         i32 [n, 3] layer, position, feature of every active feature (p >= 1),
                                     in (layer, position, feature) order
    graph/activations      f32 [n]
    graph/logit_ids        i32 [k], graph/logit_probs f32 [k]  top tokens to 0.95, at most 10
    graph/adjacency        f32 [N, N] row target, column source; nodes: features, errors [L, T],
                                     embeddings [T], logits
    graph/influence        f32 [N]   node influence (circuit-tracer's compute_node_influence)
    graph/node_mask        i32 [N]   prune_graph's node mask at 0.8 / 0.98 (written here anew)
    graph/scores           f32 [2]   replacement and completeness scores
    graph/logits           f32 [V]   the real model's last logits (the replacement model's, equal
                                     to 1e-9: checked here)
    graph/group_nodes      i32 [g]   a group of feature nodes across both blocks and several
                                     positions, one member feeding another (a supernode)
    graph/group_values     f32 [2]   the values they are all set to at once
    graph/group_predicted, graph/group_exact  f32 [2]  the change of the first logit's
                                     logit - mean(logits) at the last position: by the frozen
                                     replacement model's forward with the group clamped, and by
                                     the real model with the clamps as edits of hook_mlp_out

tests/data/dashboard/corpus.{jsonl,txt} and golden_dashboard.bin, same format (write_dashboard()):
feature dashboards (src/lab/dashboard.h) of the test transcoders (every feature, the .jsonl corpus)
and the "standard" SAE (chosen features, the .txt corpus cut at max_tokens), the corpus tokenized by
GPT-2's BPE written here (encoder.py's algorithm, the vocabulary of weights/gpt2-tiny-q8_0.gguf),
each window run as [50256] + window in float64; records listed in write_dashboard's docstring.
"""

import argparse
import json
import math
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

# TinyTestConfig() in src/tools/common/synthetic_model.cc.
N_VOCAB, N_CTX, N_EMBD, N_HEAD, N_LAYER, N_FF, LN_EPS = 50257, 64, 64, 4, 2, 256, 1e-5
SEED = 0x5EED

PROMPTS = {
    "p1": [50256],
    "p2": [464, 2068, 7586, 21831, 50256],
    "p3": [0, 50256, 31373, 11, 995, 0, 1212, 318, 257, 1332, 49999, 25],
}
GREEDY_PROMPT, GREEDY_STEPS = "p1", 8
LENS_TOP = 5
CHECKSUM_TENSORS = ["token_embd.weight", "position_embd.weight", "blk.0.attn_norm.weight",
                    "blk.0.attn_qkv.weight", "blk.0.attn_qkv.bias", "blk.1.attn_output.weight",
                    "blk.1.ffn_up.weight", "blk.1.ffn_down.weight", "output_norm.bias"]

MASK64 = (1 << 64) - 1


def fnv1a64(name):
    h = 0xCBF29CE484222325
    for b in name.encode("utf-8"):
        h = ((h ^ b) * 0x100000001B3) & MASK64
    return h


def scale_offset(name):
    if name == "token_embd.weight":
        return 0.5, 0.0
    if name == "position_embd.weight":
        return 0.3, 0.0
    if name.endswith("norm.weight"):
        return 0.2, 1.0
    if name.endswith(("attn_qkv.weight", "attn_output.weight", "ffn_up.weight")):
        return 1.5 / math.sqrt(N_EMBD), 0.0
    if name.endswith("ffn_down.weight"):
        return 1.5 / math.sqrt(N_FF), 0.0
    return 0.1, 0.0


def synthetic(name, shape):
    """The formula of synthetic_model.h; shape is (rows, cols) in ggml storage order."""
    n = int(np.prod(shape))
    key = np.uint64(fnv1a64(name) ^ SEED)
    with np.errstate(over="ignore"):
        i = np.arange(1, n + 1, dtype=np.uint64)
        z = key + i * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float64) * 2.0 ** -23 - 1.0  # exact, as float32 would be
    scale, offset = scale_offset(name)
    value = (np.float64(scale) * u + np.float64(offset)).astype(np.float32)
    return value.reshape(shape)


def build_weights():
    C, Fd = N_EMBD, N_FF
    w = {"token_embd.weight": synthetic("token_embd.weight", (N_VOCAB, C)),
         "position_embd.weight": synthetic("position_embd.weight", (N_CTX, C))}
    for l in range(N_LAYER):
        p = f"blk.{l}."
        for name, shape in [("attn_norm.weight", (C,)), ("attn_norm.bias", (C,)),
                            ("attn_qkv.weight", (3 * C, C)), ("attn_qkv.bias", (3 * C,)),
                            ("attn_output.weight", (C, C)), ("attn_output.bias", (C,)),
                            ("ffn_norm.weight", (C,)), ("ffn_norm.bias", (C,)),
                            ("ffn_up.weight", (Fd, C)), ("ffn_up.bias", (Fd,)),
                            ("ffn_down.weight", (C, Fd)), ("ffn_down.bias", (C,))]:
            w[p + name] = synthetic(p + name, shape)
    w["output_norm.weight"] = synthetic("output_norm.weight", (C,))
    w["output_norm.bias"] = synthetic("output_norm.bias", (C,))
    return w


def forward(w, ids, record=None, iv=None, embed=None):
    """GPT-2 forward over ids (positions 0..T-1); returns logits [T, V].

    ggml matrices are [out, in], which is F.linear's weight layout (HF's Conv1D is [in, out]).
    record(name, tensor) receives every observed activation. iv (a dict, keys as
    src/model/run_options.h's Interventions) breaks the model at the same points:
      ablate_heads [(l, h)], head_means {l: [C] tensor} (mean ablation; zero without it),
      skip_attn, skip_mlp, no_residual [l], post_norm bool, patches [(l, position, [C] tensor)];
      for path patching: freeze_z {l: [T, C]} (every head's output of block l replaced, TransformerLens
      hook_z), patch_z [(l, h, [n, D], pos0)] (one head's output at positions pos0..pos0+n-1, after
      freezing), patch_qkv [(l, h, "q"|"k"|"v", [n, D], pos0)] (one head's input, before its
      attention; pos0 may be left out: 0); stream_edits
      [(l, point, fn)] (fn([T, C]) -> [T, C] at blocks.l.hook_<point>, point one of resid_pre,
      attn_out, resid_mid, mlp_out, resid_post: SAE steering and clamping).
    embed ([T, C]): the stream entering block 0 instead of wte[ids] + wpe (integrated gradients).
    "blkL/resid_pre" is the stream entering block L after its patches and stream edits.
    """
    rec = record or (lambda name, t: None)
    iv = iv or {}
    post_norm = iv.get("post_norm", False)
    T = len(ids)
    C, H = N_EMBD, N_HEAD
    D = C // H
    idx = torch.tensor(ids, dtype=torch.long)
    x = w["token_embd.weight"][idx] + w["position_embd.weight"][:T] if embed is None else embed
    rec("embed", x)
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))

    def edit(l, point, t):
        for el, ep, fn in iv.get("stream_edits", []):
            if el == l and ep == point:
                t = fn(t)
        return t

    def ln(t, prefix):
        return F.layer_norm(t, (C,), w[prefix + ".weight"], w[prefix + ".bias"], LN_EPS)

    def add(x, out, l, skip, norm):
        """The residual step of one sublayer, as the intervention says."""
        if l in skip:
            return x
        x = out if l in iv.get("no_residual", []) else x + out
        return ln(x, norm) if post_norm else x

    for l in range(N_LAYER):
        p = f"blk.{l}."
        b = f"blk{l}/"
        for pl, pos, value in iv.get("patches", []):
            if pl == l:
                x = x.clone()
                x[pos] = value
        x = edit(l, "resid_pre", x)
        rec(b + "resid_pre", x)
        # Under post-norm the sublayer reads the stream itself; through a view of it, so that the
        # gradient kept at "ln1" is the sublayer's share alone (the value is the same).
        h = x.view_as(x) if post_norm else ln(x, p + "attn_norm")
        rec(b + "ln1", h)
        qkv = F.linear(h, w[p + "attn_qkv.weight"], w[p + "attn_qkv.bias"])
        q, k, v = qkv.split(C, dim=1)
        q = q.view(T, H, D).transpose(0, 1)  # [H, T, D]
        k = k.view(T, H, D).transpose(0, 1)
        v = v.view(T, H, D).transpose(0, 1)
        if any(pl == l for pl, *_ in iv.get("patch_qkv", [])):
            q, k, v = q.clone(), k.clone(), v.clone()  # split's views cannot be written in place
        for pl, ph, part, value, *pos0 in iv.get("patch_qkv", []):
            if pl == l:
                p0 = pos0[0] if pos0 else 0
                {"q": q, "k": k, "v": v}[part][ph, p0:p0 + value.shape[0]] = value
        rec(b + "q", q)
        rec(b + "k", k)
        rec(b + "v", v)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        scores = scores.masked_fill(~causal, float("-inf"))
        rec(b + "attn_scores", scores)
        probs = torch.softmax(scores, dim=-1)
        rec(b + "attn_probs", probs)
        heads = (probs @ v).transpose(0, 1).contiguous().view(T, C)
        if l in iv.get("freeze_z", {}):
            # A constant, whose own gradient (dm/dz) is still kept: the clone of a leaf that
            # requires it, which passes nothing further back.
            heads = iv["freeze_z"][l].clone().requires_grad_(True).clone()
        for pl, ph, value, *pos0 in iv.get("patch_z", []):
            if pl == l:
                p0 = pos0[0] if pos0 else 0
                heads[p0:p0 + value.shape[0], ph * D:(ph + 1) * D] = value
        for al, ah in iv.get("ablate_heads", []):
            if al == l:
                means = iv.get("head_means")
                heads[:, ah * D:(ah + 1) * D] = means[l][ah * D:(ah + 1) * D] if means else 0.0
        rec(b + "attn_heads", heads)
        attn_out = edit(l, "attn_out", F.linear(heads, w[p + "attn_output.weight"], w[p + "attn_output.bias"]))
        rec(b + "attn_out", attn_out)
        x = edit(l, "resid_mid", add(x, attn_out, l, iv.get("skip_attn", []), p + "attn_norm"))
        rec(b + "resid_attn", x)
        h = x.view_as(x) if post_norm else ln(x, p + "ffn_norm")
        rec(b + "ln2", h)
        pre = F.linear(h, w[p + "ffn_up.weight"], w[p + "ffn_up.bias"])
        rec(b + "mlp_pre", pre)
        act = F.gelu(pre, approximate="tanh")
        rec(b + "mlp_act", act)
        out = edit(l, "mlp_out", F.linear(act, w[p + "ffn_down.weight"], w[p + "ffn_down.bias"]))
        rec(b + "mlp_out", out)
        x = edit(l, "resid_post", add(x, out, l, iv.get("skip_mlp", []), p + "ffn_norm"))
        rec(b + "resid_out", x)
    h = ln(x, "output_norm")
    rec("ln_f", h)
    logits = F.linear(h, w["token_embd.weight"])  # tied head: ln_f(h) @ wte^T
    rec("logits", logits)
    return logits


def logit_lens(w, residuals):
    """Top-k of softmax(ln_f(resid) @ wte^T) for each layer's resid_out: ids, probs [L, T, k]."""
    ids, probs = [], []
    for resid in residuals:
        h = F.layer_norm(resid, (N_EMBD,), w["output_norm.weight"], w["output_norm.bias"], LN_EPS)
        p = torch.softmax(F.linear(h, w["token_embd.weight"]), dim=-1)
        top = torch.topk(p, LENS_TOP, dim=-1)  # ties are not expected with random weights
        ids.append(top.indices.to(torch.int32))
        probs.append(top.values)
    return torch.stack(ids).numpy(), torch.stack(probs).numpy()


def attribute(w, ids, position, target, contrast, iv=None):
    """Direct logit attribution, in float64 from the float32 run's tensors: each component's write
    into the residual stream at `position` through ln_f with its scale frozen at the full stream's
    (x - mean(x)) / sqrt(var(x) + eps), dotted with wte[target] (- wte[contrast]).
    Returns (names, values, logit) in the order `gpt2 attribute` prints them."""
    obs = {}
    logits = forward(w, ids, lambda name, t: obs.__setitem__(name, t.detach().clone()), iv)
    iv = iv or {}
    C, H = N_EMBD, N_HEAD
    D = C // H
    wte = w["token_embd.weight"].double()
    u = wte[target] - (wte[contrast] if contrast >= 0 else 0.0)
    x = obs[f"blk{N_LAYER - 1}/resid_out"][position].double()
    std = torch.sqrt(x.var(unbiased=False) + LN_EPS)
    gamma = w["output_norm.weight"].double()

    def dla(c):
        return float(((c - c.mean()) / std * gamma) @ u)

    names, values = ["embed"], [dla(obs["embed"][position].double())]
    total = obs["embed"][position].double()
    for l in range(N_LAYER):
        p = f"blk.{l}."
        w_o = w[p + "attn_output.weight"].double()  # [C_out, C_in]
        z = obs[f"blk{l}/attn_heads"][position].double()
        skipped_attn = l in iv.get("skip_attn", [])
        for h in range(H):
            c = w_o[:, h * D:(h + 1) * D] @ z[h * D:(h + 1) * D]
            c = c * 0.0 if skipped_attn else c
            names.append(f"{l}.{h}")
            values.append(dla(c))
            total = total + c
        bias = w[p + "attn_output.bias"].double() * (0.0 if skipped_attn else 1.0)
        names.append(f"attn_bias.{l}")
        values.append(dla(bias))
        total = total + bias
        mlp = obs[f"blk{l}/mlp_out"][position].double() * (0.0 if l in iv.get("skip_mlp", []) else 1.0)
        names.append(f"mlp.{l}")
        values.append(dla(mlp))
        total = total + mlp
    assert torch.allclose(total, x, atol=1e-4), "components must sum to the final stream"
    names.append("ln_f_bias")
    values.append(float(w["output_norm.bias"].double() @ u))
    logit = float(logits[position, target]) - (float(logits[position, contrast]) if contrast >= 0 else 0.0)
    assert abs(sum(values) - logit) < 1e-3 * max(1.0, abs(logit)), (sum(values), logit)
    return names, values, logit


# Interventions checked against src/model on prompt INTERVENTION_PROMPT (see the docstring).
INTERVENTION_PROMPT, PATCH_SOURCE, PATCH_LAYER, PATCH_POSITION = "p3", "p2", 1, 3
ATTRIBUTION_CONTRAST = 2068


def intervention_cases(w, clean):
    """name -> iv dict; `clean` holds the clean run's observed tensors of INTERVENTION_PROMPT."""
    heads = [(0, 1), (1, 3)]
    means = {l: clean[f"blk{l}/attn_heads"].mean(dim=0) for l in range(N_LAYER)}
    source = {}
    forward(w, PROMPTS[PATCH_SOURCE], lambda name, t: source.__setitem__(name, t.detach().clone()))
    patch_value = source[f"blk{PATCH_LAYER - 1}/resid_out"][PATCH_POSITION]
    return {
        "ablate_zero": {"ablate_heads": heads},
        "ablate_mean": {"ablate_heads": heads, "head_means": means},
        "skip_attn": {"skip_attn": [1]},
        "skip_mlp": {"skip_mlp": [0]},
        "no_residual": {"no_residual": [1]},
        "post_norm": {"post_norm": True},
        "patch": {"patches": [(PATCH_LAYER, PATCH_POSITION, patch_value)]},
        "combined": {"ablate_heads": [(0, 0), (1, 2)], "skip_mlp": [1], "no_residual": [0]},
    }


def write_interventions(w, path):
    out = GoldenWriter()
    ids = PROMPTS[INTERVENTION_PROMPT]
    out.add("ids", np.array(ids, np.int32))
    out.add("patch_source_ids", np.array(PROMPTS[PATCH_SOURCE], np.int32))
    clean = {}
    clean_logits = forward(w, ids, lambda name, t: clean.__setitem__(name, t.detach().clone()))
    for name, iv in intervention_cases(w, clean).items():
        observed = {}
        logits = forward(w, ids, lambda n, t: observed.__setitem__(n, t.detach().clone()), iv)
        # The last row only keeps the file small; resid_out pins every position.
        out.add(f"iv/{name}/logits", logits[-1].numpy().astype(np.float32))
        for l in range(N_LAYER):
            out.add(f"iv/{name}/blk{l}/resid_out", observed[f"blk{l}/resid_out"].numpy())
    T = len(ids)
    last_top2 = torch.topk(clean_logits[T - 1], 2).indices
    attributions = {
        "last": (T - 1, int(last_top2[0]), -1, None),
        "contrast": (4, int(torch.argmax(clean_logits[4])), ATTRIBUTION_CONTRAST, None),
        "ablated": (T - 1, int(last_top2[1]), -1, {"ablate_heads": [(0, 1)], "skip_mlp": [0],
                                                  "skip_attn": [1]}),
    }
    for name, (position, target, contrast, iv) in attributions.items():
        names, values, logit = attribute(w, ids, position, target, contrast, iv)
        out.add(f"attr/{name}/query", np.array([position, target, contrast], np.int32))
        out.add(f"attr/{name}/values", np.array(values + [logit], np.float32))
    out.write(path)
    print(f"wrote {path}: {len(out.records)} records", file=sys.stderr)


HEAD_IDS_SEED, HEAD_IDS_COUNT = 2028, 50


def default_head_ids(n_vocab, n=HEAD_IDS_COUNT):
    """SplitMix64 (src/model/sampler.h's Rng) seeded HEAD_IDS_SEED; id = next % (n_vocab - 1),
    an id drawn before is skipped."""
    state, ids = HEAD_IDS_SEED, []
    while len(ids) < n:
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        z ^= z >> 31
        i = z % (n_vocab - 1)
        if i not in ids:
            ids.append(i)
    return ids


def head_scores(w, ids):
    """prev, dup, induction [L, H] on [50256, ids, ids], with A = attn_probs[l, h] (query, key):
    prev = mean_{p=1..2R} A[p, p-1], dup = mean_{p=R+1..2R} A[p, p-R],
    induction = mean_{p=R+1..2R} A[p, p-R+1]; averaged in float64."""
    R = len(ids)
    seq = [50256] + list(ids) + list(ids)
    observed = {}
    forward(w, seq, lambda name, t: observed.__setitem__(name, t.detach().clone()))
    prev, dup, ind = (np.zeros((N_LAYER, N_HEAD), np.float64) for _ in range(3))
    p_all = np.arange(1, 2 * R + 1)
    p_rep = np.arange(R + 1, 2 * R + 1)
    for l in range(N_LAYER):
        a = observed[f"blk{l}/attn_probs"].double().numpy()  # [H, T, T]
        for h in range(N_HEAD):
            prev[l, h] = a[h, p_all, p_all - 1].mean()
            dup[l, h] = a[h, p_rep, p_rep - R].mean()
            ind[l, h] = a[h, p_rep, p_rep - R + 1].mean()
    return prev, dup, ind


# The tiny model's context (64) holds at most R = 31; "repeats" has ids that recur inside a copy.
HEAD_CASES = {
    "default20": default_head_ids(N_VOCAB)[:20],
    "repeats": [464, 2068, 464, 7586, 50256, 21831, 2068, 0, 31],
    "max31": default_head_ids(N_VOCAB, 81)[50:81],
}


def write_heads(w, path):
    out = GoldenWriter()
    out.add("default_ids", np.array(default_head_ids(N_VOCAB), np.int32))
    for name, ids in HEAD_CASES.items():
        prev, dup, ind = head_scores(w, ids)
        out.add(f"{name}/ids", np.array(ids, np.int32))
        out.add(f"{name}/prev", prev.astype(np.float32))
        out.add(f"{name}/dup", dup.astype(np.float32))
        out.add(f"{name}/induction", ind.astype(np.float32))
    out.write(path)
    print(f"wrote {path}: {len(out.records)} records", file=sys.stderr)


# Path patching (src/lab/path_patch.h) on the clean prompt PATH_CLEAN and its corruption.
PATH_CLEAN = "p3"
PATH_CORRUPTIONS = {2: 2068, 7: 7586, 10: 464}  # position -> id, as tests/model/head_patch_test.cc
PART_CODES = {"q": 0, "k": 1, "v": 2}


def path_patch(w, clean_ids, corrupt_ids, sender, receivers, target, contrast):
    """ARENA's path patching, literally: (1) clean and corrupt runs keep every head's hook_z;
    (2) the clean prompt with every head's output frozen at its clean value except the sender's,
    taken from the corrupt run (MLPs and LayerNorms recomputed), keeping the receivers' q/k/v;
    (3) the clean prompt with only those receivers' inputs patched; no receivers: step 2's logits.
    Returns m_patched, m_clean, m_corrupt with m = logit[-1, target] - logit[-1, contrast]."""
    D = N_EMBD // N_HEAD
    clean, corrupt = {}, {}
    clean_logits = forward(w, clean_ids, lambda n, t: clean.__setitem__(n, t.detach().clone()))
    corrupt_logits = forward(w, corrupt_ids, lambda n, t: corrupt.__setitem__(n, t.detach().clone()))

    def metric(logits):
        return float(logits[-1, target]) - (float(logits[-1, contrast]) if contrast >= 0 else 0.0)

    ls, hs = sender
    step2 = {}
    logits = forward(w, clean_ids, lambda n, t: step2.__setitem__(n, t.detach().clone()), {
        "freeze_z": {l: clean[f"blk{l}/attn_heads"] for l in range(N_LAYER)},
        "patch_z": [(ls, hs, corrupt[f"blk{ls}/attn_heads"][:, hs * D:(hs + 1) * D])]})
    if receivers:
        logits = forward(w, clean_ids, None, {
            "patch_qkv": [(l, h, part, step2[f"blk{l}/{part}"][h]) for l, h, part in receivers]})
    return metric(logits), metric(clean_logits), metric(corrupt_logits)


def write_path_patch(w, path):
    out = GoldenWriter()
    clean_ids = list(PROMPTS[PATH_CLEAN])
    corrupt_ids = list(clean_ids)
    for position, token in PATH_CORRUPTIONS.items():
        corrupt_ids[position] = token
    out.add("clean_ids", np.array(clean_ids, np.int32))
    out.add("corrupt_ids", np.array(corrupt_ids, np.int32))
    target = int(torch.argmax(forward(w, clean_ids)[-1]))  # the default target
    contrast = int(torch.argmax(forward(w, corrupt_ids)[-1]))
    assert contrast != target

    def receivers_record(receivers):
        flat = [len(receivers)]
        for l, h, part in receivers:
            flat += [l, h, PART_CODES[part]]
        return np.array(flat, np.int32)

    cases = {
        "logits": ((0, 1), [], -1),
        "logits_contrast": ((1, 2), [], contrast),
        "q": ((0, 3), [(1, 0, "q"), (1, 2, "q")], contrast),
        "k": ((0, 0), [(1, 1, "k")], -1),
        "v": ((0, 2), [(1, 3, "v"), (1, 1, "v")], contrast),
        "mixed": ((0, 1), [(1, 0, "q"), (1, 1, "k"), (1, 3, "v")], contrast),
    }
    for name, (sender, receivers, c) in cases.items():
        values = path_patch(w, clean_ids, corrupt_ids, sender, receivers, target, c)
        out.add(f"pp/{name}/query", np.array([sender[0], sender[1], target, c], np.int32))
        out.add(f"pp/{name}/receivers", receivers_record(receivers))
        out.add(f"pp/{name}/values", np.array(values, np.float32))
    sweeps = {"logits": ([], contrast), "qk": ([(1, 0, "q"), (1, 2, "k")], -1)}
    for name, (receivers, c) in sweeps.items():
        diffs = []
        for l in range(N_LAYER):
            for h in range(N_HEAD):
                patched, clean_m, _ = path_patch(w, clean_ids, corrupt_ids, (l, h), receivers, target, c)
                diffs.append(patched - clean_m)
        out.add(f"sweep/{name}/query", np.array([target, c], np.int32))
        out.add(f"sweep/{name}/receivers", receivers_record(receivers))
        out.add(f"sweep/{name}/values", np.array(diffs, np.float32))
    out.write(path)
    print(f"wrote {path}: {len(out.records)} records", file=sys.stderr)


# Gradients (src/model/backward.h, src/lab/gradients.h) by torch autograd, written to
# golden_gradients.bin: the gradient of m = logit[position, target] - logit[position, contrast]
# at every hook point, plain and under each intervention case; saliency (grad, ig) and
# attribution patching of GRADIENT_PROMPT against GRADIENT_CORRUPT.
GRADIENT_PROMPT = "p3"
GRADIENT_CORRUPT = [0, 50256, 464, 11, 995, 0, 1212, 318, 2068, 1332, 49999, 25]
GRADIENT_HOOKS = ["resid_pre", "ln1", "q", "k", "v", "attn_scores", "attn_heads", "attn_out",
                  "resid_attn", "ln2", "mlp_pre", "mlp_act", "mlp_out", "resid_out"]
IG_STEPS = 16


def metric_of(logits, position, target, contrast):
    m = logits[position, target]
    return m - logits[position, contrast] if contrast >= 0 else m


def gradient_keeper():
    """({name: tensor}, keep(name, tensor)): a forward() recorder whose tensors keep their .grad."""
    kept = {}

    def keep(name, t):
        if t.requires_grad and not t.is_leaf:
            t.retain_grad()
        kept[name] = t

    return kept, keep


def hook_gradients(w, ids, position, target, contrast, iv=None, embed=None):
    """(m, {name: dm/d tensor}) for every recorded tensor; unused tensors get zeros."""
    kept, keep = gradient_keeper()
    T = len(ids)
    if embed is None:
        embed = w["token_embd.weight"][torch.tensor(ids)] + w["position_embd.weight"][:T]
    x0 = embed.detach().clone().requires_grad_(True)
    logits = forward(w, ids, keep, iv, embed=x0)
    m = metric_of(logits, position, target, contrast)
    m.backward()
    grads = {name: (t.grad if t.grad is not None else torch.zeros_like(t)).detach().clone()
             for name, t in kept.items()}
    return float(m), grads


def saliency(w, ids, position, target, contrast, method, steps=IG_STEPS, iv=None):
    """Per-token values, total and delta of `gpt2 saliency` (lab/gradients.h), under iv."""
    T = len(ids)
    x = (w["token_embd.weight"][torch.tensor(ids)] + w["position_embd.weight"][:T]).detach()
    m, g = hook_gradients(w, ids, position, target, contrast, iv)
    if method == "grad":
        grad, delta = g["embed"], m
    else:
        grad = torch.zeros_like(x)
        for k in range(steps):
            alpha = (k + 0.5) / steps
            _, gk = hook_gradients(w, ids, position, target, contrast, iv, embed=alpha * x)
            grad += gk["embed"]
        grad /= steps
        with torch.no_grad():
            base = float(metric_of(forward(w, ids, iv=iv, embed=torch.zeros_like(x)), position, target, contrast))
        delta = m - base
    values = (x.double() * grad.double()).sum(dim=1)
    return values.numpy(), float(values.sum()), delta


SCORE_CASES = {"plain": ((1, 2, 11, 4), None), "block0": ((0, 1, 9, 3), None),
               "same": ((1, 0, 6, 6), None), "patch": ((1, 3, 10, 2), "patch"),
               "combined": ((1, 2, 8, 5), "combined"), "post_norm": ((1, 1, 11, 7), "post_norm")}


def score_gradients(w, ids, layer, head, query, key, iv=None):
    """(s, ds/d embed [T, C], [ds/d resid_pre_l for l <= layer], values [T]) of one attention score."""
    kept, keep = gradient_keeper()
    T = len(ids)
    x = (w["token_embd.weight"][torch.tensor(ids)] + w["position_embd.weight"][:T]).detach()
    x0 = x.clone().requires_grad_(True)
    forward(w, ids, keep, iv, embed=x0)
    s = kept[f"blk{layer}/attn_scores"][head, query, key]
    s.backward()
    resid = [kept[f"blk{l}/resid_pre"] for l in range(layer + 1)]
    resid = torch.stack([t.grad if t.grad is not None else torch.zeros_like(t) for t in resid])
    values = (x.double() * x0.grad.double()).sum(dim=1)
    return float(s), x0.grad.detach().clone(), resid.detach().clone(), values.numpy()


EXACT_CASES = {"head0": (0, 0, 2), "head1": (0, 1, 1), "resid0": (1, 0, 2), "resid1": (1, 1, 9)}


def exact_patch(w, clean, corrupt, kind, layer, index, target, contrast):
    """(m_patched - m_clean, m_clean, m_patched): one cell of attribution patching, run exactly."""
    D = N_EMBD // N_HEAD
    bad = {}
    with torch.no_grad():
        forward(w, corrupt, lambda n, t: bad.__setitem__(n, t.clone()))
        m_clean = float(metric_of(forward(w, clean), len(clean) - 1, target, contrast))
        if kind == 0:
            iv = {"patch_z": [(layer, index, bad[f"blk{layer}/attn_heads"][:, index * D:(index + 1) * D])]}
        else:
            iv = {"patches": [(layer, index, bad[f"blk{layer}/resid_pre"][index])]}
        m = float(metric_of(forward(w, clean, iv=iv), len(clean) - 1, target, contrast))
    return m - m_clean, m_clean, m


def attribution_patching(w, clean, corrupt, target, contrast, iv=None):
    """Heads [L, H], resid_pre [L, T], metric, metric_corrupt of `gpt2 atp` (both runs under iv)."""
    T = len(clean)
    D = N_EMBD // N_HEAD
    bad = {}
    with torch.no_grad():
        logits_bad = forward(w, corrupt, lambda n, t: bad.__setitem__(n, t.clone()), iv)
    good = {}
    m, g = hook_gradients(w, clean, T - 1, target, contrast, iv)
    with torch.no_grad():
        forward(w, clean, lambda n, t: good.__setitem__(n, t.clone()), iv)
    heads = np.zeros((N_LAYER, N_HEAD), np.float32)
    resid = np.zeros((N_LAYER, T), np.float32)
    for l in range(N_LAYER):
        dz = (bad[f"blk{l}/attn_heads"] - good[f"blk{l}/attn_heads"]).double() * g[f"blk{l}/attn_heads"].double()
        for h in range(N_HEAD):
            heads[l, h] = float(dz[:, h * D:(h + 1) * D].sum())
        dx = (bad[f"blk{l}/resid_pre"] - good[f"blk{l}/resid_pre"]).double() * g[f"blk{l}/resid_pre"].double()
        resid[l] = dx.sum(dim=1).numpy()
    m_bad = float(metric_of(logits_bad, T - 1, target, contrast))
    return heads, resid, m, m_bad


def write_hook_gradients(w, ids, out, name, position, target, contrast, iv):
    """grad/<name>/query, metric and the gradient at every hook."""
    m, g = hook_gradients(w, ids, position, target, contrast, iv)
    out.add(f"grad/{name}/query", np.array([position, target, contrast], np.int32))
    out.add(f"grad/{name}/metric", np.array([m], np.float32))
    out.add(f"grad/{name}/embed", g["embed"].numpy())
    out.add(f"grad/{name}/ln_f", g["ln_f"].numpy())
    for l in range(N_LAYER):
        for hook in GRADIENT_HOOKS:
            out.add(f"grad/{name}/blk{l}/{hook}", g[f"blk{l}/{hook}"].numpy())


def write_gradients(w, path):
    out = GoldenWriter()
    ids = PROMPTS[GRADIENT_PROMPT]
    T = len(ids)
    out.add("ids", np.array(ids, np.int32))
    out.add("corrupt_ids", np.array(GRADIENT_CORRUPT, np.int32))
    out.add("patch_source_ids", np.array(PROMPTS[PATCH_SOURCE], np.int32))
    clean = {}
    with torch.no_grad():
        clean_logits = forward(w, ids, lambda name, t: clean.__setitem__(name, t.detach().clone()))
    top = int(torch.argmax(clean_logits[T - 1]))
    cases = {"plain": (T - 1, top, -1, None),
             "contrast": (4, int(torch.argmax(clean_logits[4])), ATTRIBUTION_CONTRAST, None)}
    for name, iv in intervention_cases(w, clean).items():
        cases[name] = (T - 1, top, ATTRIBUTION_CONTRAST, iv)
    for name, (position, target, contrast, iv) in cases.items():
        write_hook_gradients(w, ids, out, name, position, target, contrast, iv)
    for method in ["grad", "ig"]:
        values, total, delta = saliency(w, ids, T - 1, top, -1, method)
        out.add(f"saliency/{method}/values", values.astype(np.float32))
        out.add(f"saliency/{method}/total_delta", np.array([total, delta], np.float32))
    heads, resid, m, m_bad = attribution_patching(w, ids, GRADIENT_CORRUPT, top, -1)
    out.add("atp/heads", heads)
    out.add("atp/resid_pre", resid)
    out.add("atp/metrics", np.array([m, m_bad], np.float32))
    out.add("atp/query", np.array([top, -1], np.int32))
    ivs = intervention_cases(w, clean)
    for name, (query, iv_name) in SCORE_CASES.items():
        s, embed_grad, resid_grad, values = score_gradients(w, ids, *query, ivs[iv_name] if iv_name else None)
        out.add(f"score/{name}/query", np.array(query, np.int32))
        out.add(f"score/{name}/score", np.array([s], np.float32))
        out.add(f"score/{name}/embed", embed_grad.numpy())
        out.add(f"score/{name}/resid_pre", resid_grad.numpy())
        out.add(f"score/{name}/values", values.astype(np.float32))
    for name, (kind, layer, index) in EXACT_CASES.items():
        contrast = ATTRIBUTION_CONTRAST if name.endswith("1") else -1
        values = exact_patch(w, ids, GRADIENT_CORRUPT, kind, layer, index, top, contrast)
        out.add(f"exact/{name}/query", np.array([kind, layer, index, top, contrast], np.int32))
        out.add(f"exact/{name}/values", np.array(values, np.float32))
    write_gradient_cases(w, ids, clean, top, out)
    out.write(path)
    print(f"wrote {path}: {len(out.records)} records", file=sys.stderr)


# The interventions the backward differentiates beyond intervention_cases(): head patches (a
# head's output or q/k/v at some positions), a frozen block, and SAE steering and clamping at
# each stream point (the SAEs of SAES, their weights as write_saes makes them). Each case's head
# patches and frozen blocks are written with it, so the test builds them from the file:
#   grad/<case>/head_patches   i32 [n, 4]  layer, head, part (0 z, 1 q, 2 k, 3 v), pos0
#   grad/<case>/head_patch/<i> f32 [rows, D]
#   grad/<case>/frozen         i32 [n]     blocks whose every head's output is given
#   grad/<case>/frozen/<i>     f32 [T, C]
# and its gradients as the other grad/ cases; the SAE edits (name, steer, clamp) are GRADIENT_SAE_CASES.
# saliency/<case>/<method>/values, total_delta and atp/<case>/heads, resid_pre, metrics, query as
# the plain ones, under the case's interventions, for the cases of GRADIENT_EXPERIMENT_CASES.
GRADIENT_HEAD_PATCHES = {  # case -> [(layer, head, part, pos0, rows)]; rows -1: to the end
    "patch_z": [(1, 2, 0, 2, 4)],
    "patch_q": [(1, 1, 1, 4, 3)],
    "patch_k": [(1, 0, 2, 0, 5)],
    "patch_v": [(0, 3, 3, 2, -1)],
    "everything": [(0, 2, 2, 1, 4)],
}
GRADIENT_FROZEN = {"freeze": [0], "everything": [1]}
GRADIENT_SAE_CASES = {  # case -> [(sae, steer, clamp)]
    "sae_standard": [("standard", True, True)],
    "sae_layer_norm": [("layer_norm", True, True)],
    "sae_topk": [("topk", False, True)],
    "sae_jumprelu": [("jumprelu", False, True)],
    "sae_mlp_out": [("mlp_out", True, True)],
    "everything": [("layer_norm", True, True)],
}
GRADIENT_OTHER = {"everything": {"skip_mlp": [0], "ablate_heads": [(1, 3)]}}
GRADIENT_EXPERIMENT_CASES = ["sae_layer_norm", "sae_standard", "patch_k", "freeze", "everything"]
PART_NAMES = ["z", "q", "k", "v"]


def sae_steer_fn(name, wt, pairs):
    """SAE steering as a stream edit: x + scale * sum alpha W_dec[F] (float64 inside)."""
    W_dec = torch.from_numpy(wt["W_dec"]).double()

    def steer(t):
        _, _, scale = sae_encode(name, wt, t)
        add = sum(alpha * W_dec[feat] for feat, alpha in pairs)
        return (t.double() + scale * add).float()
    return steer


def sae_clamp_fn(name, wt, pairs):
    """SAE clamping as a stream edit: x + scale * sum (value - f_F(x)) W_dec[F] (float64 inside)."""
    W_dec = torch.from_numpy(wt["W_dec"]).double()

    def clamp(t):
        f_now, _, scale = sae_encode(name, wt, t)
        add = sum((value - f_now[:, feat:feat + 1]) * W_dec[feat] for feat, value in pairs)
        return (t.double() + scale * add).float()
    return clamp


def gradient_cases(w, ids, clean, out):
    """name -> iv of the cases above, writing each one's head patches and frozen blocks to out."""
    T, D = len(ids), N_EMBD // N_HEAD
    rng = np.random.default_rng(fnv1a64("gradient_cases") & 0xFFFFFFFF)
    names = sorted(set(GRADIENT_HEAD_PATCHES) | set(GRADIENT_FROZEN) | set(GRADIENT_SAE_CASES))
    cases = {}
    for name in names:
        iv = {k: (list(v) if isinstance(v, list) else v) for k, v in GRADIENT_OTHER.get(name, {}).items()}
        patches = GRADIENT_HEAD_PATCHES.get(name, [])
        if patches:
            out.add(f"grad/{name}/head_patches", np.array([p[:4] for p in patches], np.int32))
        for i, (layer, head, part, pos0, rows) in enumerate(patches):
            rows = T - pos0 if rows < 0 else rows
            scale = float(clean[f"blk{layer}/{'attn_heads' if part == 0 else PART_NAMES[part]}"].std())
            value = (scale * rng.normal(0, 1, (rows, D))).astype(np.float32)
            out.add(f"grad/{name}/head_patch/{i}", value)
            if part == 0:
                iv.setdefault("patch_z", []).append((layer, head, torch.from_numpy(value), pos0))
            else:
                iv.setdefault("patch_qkv", []).append((layer, head, PART_NAMES[part], torch.from_numpy(value), pos0))
        frozen = GRADIENT_FROZEN.get(name, [])
        if frozen:
            out.add(f"grad/{name}/frozen", np.array(frozen, np.int32))
        for i, layer in enumerate(frozen):
            value = (0.8 * clean[f"blk{layer}/attn_heads"].numpy()[::-1].copy()).astype(np.float32)
            out.add(f"grad/{name}/frozen/{i}", value)
            iv.setdefault("freeze_z", {})[layer] = torch.from_numpy(value)
        for sae, steer, clamp in GRADIENT_SAE_CASES.get(name, []):
            hook = SAES[sae][0]
            wt = make_sae_weights(sae, sae_hook_tensor(clean, hook))
            _, l, point = hook.split(".")
            point = point[len("hook_"):]
            if steer:
                iv.setdefault("stream_edits", []).append((int(l), point, sae_steer_fn(sae, wt, SAE_STEER)))
            if clamp:
                iv.setdefault("stream_edits", []).append((int(l), point, sae_clamp_fn(sae, wt, SAE_CLAMP)))
        cases[name] = iv
    return cases


SCORE_IV_CASES = {"patch_k": (1, 0, 9, 3), "sae_standard": (1, 2, 10, 6)}


def write_gradient_cases(w, ids, clean, top, out):
    T = len(ids)
    cases = gradient_cases(w, ids, clean, out)
    for name, iv in cases.items():
        write_hook_gradients(w, ids, out, name, T - 1, top, ATTRIBUTION_CONTRAST, iv)
    for name in GRADIENT_EXPERIMENT_CASES:
        iv = cases[name]
        for method in ["grad", "ig"]:
            values, total, delta = saliency(w, ids, T - 1, top, -1, method, iv=iv)
            out.add(f"saliency/{name}/{method}/values", values.astype(np.float32))
            out.add(f"saliency/{name}/{method}/total_delta", np.array([total, delta], np.float32))
        heads, resid, m, m_bad = attribution_patching(w, ids, GRADIENT_CORRUPT, top, -1, iv)
        out.add(f"atp/{name}/heads", heads)
        out.add(f"atp/{name}/resid_pre", resid)
        out.add(f"atp/{name}/metrics", np.array([m, m_bad], np.float32))
    for name, query in SCORE_IV_CASES.items():
        s, embed_grad, resid_grad, values = score_gradients(w, ids, *query, cases[name])
        out.add(f"score/{name}/query", np.array(query, np.int32))
        out.add(f"score/{name}/score", np.array([s], np.float32))
        out.add(f"score/{name}/embed", embed_grad.numpy())
        out.add(f"score/{name}/resid_pre", resid_grad.numpy())
        out.add(f"score/{name}/values", values.astype(np.float32))


# Sparse autoencoders in SAELens's layout on the tiny model (src/sae/, tests/sae/sae_test.cc):
# name -> (hook, architecture, k, apply_b_dec_to_input, normalize_activations, cfg layout). The
# layouts are those the public files use: "jb" (jbloom's Reformatted releases: hook_point and
# hook_name at the top level), "saelens6" (metadata.hook_name, TopK's k at the top level),
# "legacy" (top-level hook_name, k in activation_fn_kwargs), "hook_point" (only hook_point).
SAE_D = 96
SAES = {
    "standard": ("blocks.1.hook_resid_pre", "standard", 0, True, "none", "jb"),
    "jumprelu": ("blocks.0.hook_resid_post", "jumprelu", 0, False, "none", "saelens6"),
    "topk": ("blocks.1.hook_attn_out", "topk", 8, True, "none", "legacy"),
    "layer_norm": ("blocks.0.hook_resid_mid", "standard", 0, True, "layer_norm", "hook_point"),
    "mlp_out": ("blocks.1.hook_mlp_out", "topk", 6, False, "none", "saelens6"),
}
SAE_PROMPT = "p3"
SAE_STEER = [(3, 4.0), (17, -2.5)]   # (feature, alpha)
SAE_CLAMP = [(5, 0.0), (11, 3.0)]    # (feature, value)
SAE_LOGIT_FEATURE = 7


def sae_cfg(name, d_in):
    hook, arch, k, apply_b_dec, norm, layout = SAES[name]
    cfg = {"architecture": arch, "d_in": d_in, "d_sae": SAE_D, "dtype": "float32", "device": "cpu",
           "apply_b_dec_to_input": apply_b_dec, "normalize_activations": norm}
    if layout == "jb":
        cfg.update({"model_name": "gpt2-small", "hook_point": hook, "hook_name": hook,
                    "hook_point_layer": int(hook.split(".")[1]), "hook_point_head_index": None})
    elif layout == "saelens6":
        cfg["metadata"] = {"model_name": "gpt2-small", "hook_name": hook, "hook_head_index": None,
                           "prepend_bos": True, "context_size": 128}
        if arch == "topk":
            cfg["k"] = k
    elif layout == "legacy":
        cfg.update({"hook_name": hook, "hook_layer": int(hook.split(".")[1]), "hook_head_index": None,
                    "activation_fn_str": arch if arch == "topk" else "relu"})
        if arch == "topk":
            cfg["activation_fn_kwargs"] = {"k": k}
    else:
        cfg.update({"hook_point": hook, "hook_point_layer": int(hook.split(".")[1])})
    return cfg


def sae_hook_tensor(observed, hook):
    """The tensor at blocks.L.hook_<point> of a recorded run, [T, C]."""
    _, l, point = hook.split(".")
    l = int(l)
    point = point[len("hook_"):]
    if point == "resid_pre":
        return observed["embed"] if l == 0 else observed[f"blk{l - 1}/resid_out"]
    names = {"resid_mid": "resid_attn", "resid_post": "resid_out", "attn_out": "attn_out",
             "mlp_out": "mlp_out"}
    return observed[f"blk{l}/{names[point]}"]


def make_sae_weights(name, x):
    """Random weights for SAE `name` whose input rows are x [T, C] (the centred stream at its hook):
    W_enc ~ N(0, 1/d_in) and b_enc set per feature so that roughly a fifth of them fire."""
    hook, arch, k, apply_b_dec, norm, _ = SAES[name]
    rng = np.random.default_rng(fnv1a64("sae/" + name) & 0xFFFFFFFF)
    d_in = x.shape[1]
    W_enc = rng.normal(0, 1 / math.sqrt(d_in), (d_in, SAE_D)).astype(np.float32)
    W_dec = rng.normal(0, 1 / math.sqrt(d_in), (SAE_D, d_in)).astype(np.float32)
    b_dec = (0.05 * rng.normal(0, 1, d_in) * float(x.std())).astype(np.float32)
    xin = sae_input(x.double(), torch.from_numpy(b_dec), apply_b_dec, norm)[0]
    pre = (xin @ torch.from_numpy(W_enc).double()).numpy()
    spread = pre.std(axis=0) + 1e-6
    b_enc = (-0.8 * spread + 0.1 * spread * rng.normal(0, 1, SAE_D)).astype(np.float32)
    weights = {"W_enc": W_enc, "b_enc": b_enc, "W_dec": W_dec, "b_dec": b_dec}
    if arch == "jumprelu":
        weights["threshold"] = (0.3 * spread * rng.uniform(0, 1, SAE_D)).astype(np.float32)
    return weights


def sae_input(x, b_dec, apply_b_dec, norm):
    """SAELens's encoder input from the stream rows x [T, C] (TransformerLens's stream is centred):
    (x - mean_d(x)) / (std_d + 1e-5) (layer_norm only; torch.std, unbiased), minus b_dec if
    apply_b_dec_to_input. Returns (input, scale [T, 1])."""
    xc = x - x.mean(dim=-1, keepdim=True)
    scale = torch.ones(x.shape[0], 1, dtype=x.dtype)
    if norm == "layer_norm":
        scale = xc.std(dim=-1, keepdim=True) + 1e-5
    xin = xc / scale
    if apply_b_dec:
        xin = xin - b_dec.to(x.dtype)
    return xin, scale


def sae_encode(name, wt, x):
    """(features [T, d_sae], x_hat [T, C] in the centred basis, scale [T, 1]); float64."""
    hook, arch, k, apply_b_dec, norm, _ = SAES[name]
    W = {key: torch.from_numpy(v).double() for key, v in wt.items()}
    xin, scale = sae_input(x.double(), W["b_dec"], apply_b_dec, norm)
    pre = xin @ W["W_enc"] + W["b_enc"]
    if arch == "standard":
        f = torch.relu(pre)
    elif arch == "jumprelu":
        f = torch.relu(pre) * (pre > W["threshold"])
    else:  # SAELens TopK: the k largest pre-activations, through ReLU; the rest zero
        top = torch.topk(pre, k, dim=-1)
        f = torch.zeros_like(pre).scatter(-1, top.indices, torch.relu(top.values))
    x_hat = (f @ W["W_dec"] + W["b_dec"]) * scale
    return f, x_hat, scale


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for key, value in tensors.items():
        data = np.ascontiguousarray(value, dtype="<f4").tobytes()
        header[key] = {"dtype": "F32", "shape": list(value.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    encoded = json.dumps(header, separators=(",", ":")).encode("utf-8")
    encoded += b" " * (-len(encoded) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)))
        f.write(encoded)
        for data in blobs:
            f.write(data)


def write_saes(w, directory, path):
    """tests/data/sae/<name>/{cfg.json,sae_weights.safetensors} and golden_sae.bin:
        sae/<name>/ids           i32 [T]    SAE_PROMPT
        sae/<name>/features      f32 [T, d_sae]  activations at each position
        sae/<name>/explained     f32 [T]    1 - |xc - x_hat|^2 / |xc|^2 (xc: the centred stream)
        sae/<name>/logit_weights f32 [V]    W_dec[SAE_LOGIT_FEATURE] @ W_U, W_U = diag(ln_f.weight) wte^T
                                            (TransformerLens's W_U with ln_f folded in, as
                                            Neuronpedia's logit weights)
        sae/<name>/steer         f32 [2n]   (feature, alpha) pairs; steer/logits f32 [T, V] last row only
        sae/<name>/clamp         f32 [2n]   (feature, value) pairs; clamp/logits f32 [V]
        sae/<name>/both/logits   f32 [V]    steering and clamping together
    Steering adds alpha * W_dec[F] * scale to the stream at the hook at every position; clamping
    adds (value - f_F) * W_dec[F] * scale (scale: layer_norm's std + 1e-5, else 1)."""
    import os
    out = GoldenWriter()
    ids = PROMPTS[SAE_PROMPT]
    observed = {}
    forward(w, ids, lambda name, t: observed.__setitem__(name, t.detach().clone()))
    wte = w["token_embd.weight"].double()
    for name in SAES:
        hook, arch, k, apply_b_dec, norm, _ = SAES[name]
        x = sae_hook_tensor(observed, hook)
        wt = make_sae_weights(name, x)
        os.makedirs(f"{directory}/{name}", exist_ok=True)
        with open(f"{directory}/{name}/cfg.json", "w") as f:
            json.dump(sae_cfg(name, N_EMBD), f, indent=2)
            f.write("\n")
        write_safetensors(f"{directory}/{name}/sae_weights.safetensors", wt)
        f_act, x_hat, _ = sae_encode(name, wt, x)
        xc = x.double() - x.double().mean(dim=-1, keepdim=True)
        explained = 1 - ((xc - x_hat) ** 2).sum(-1) / (xc ** 2).sum(-1)
        fired = float((f_act > 0).double().mean())
        out.add(f"sae/{name}/ids", np.array(ids, np.int32))
        out.add(f"sae/{name}/features", f_act.numpy().astype(np.float32))
        out.add(f"sae/{name}/explained", explained.numpy().astype(np.float32))
        W_dec = torch.from_numpy(wt["W_dec"]).double()
        gamma = w["output_norm.weight"].double()
        out.add(f"sae/{name}/logit_weights",
                ((W_dec[SAE_LOGIT_FEATURE] * gamma) @ wte.T).numpy().astype(np.float32))
        _, l, point = hook.split(".")
        l, point = int(l), point[len("hook_"):]

        steer = sae_steer_fn(name, wt, SAE_STEER)
        clamp = sae_clamp_fn(name, wt, SAE_CLAMP)

        out.add(f"sae/{name}/steer", np.array([v for pair in SAE_STEER for v in pair], np.float32))
        out.add(f"sae/{name}/clamp", np.array([v for pair in SAE_CLAMP for v in pair], np.float32))
        for case, fns in [("steer", [steer]), ("clamp", [clamp]), ("both", [steer, clamp])]:
            # The CLI applies steering before clamping, each from the stream as it arrives.
            logits = forward(w, ids, iv={"stream_edits": [(l, point, fn) for fn in fns]})
            out.add(f"sae/{name}/{case}/logits", logits[-1].numpy().astype(np.float32))
        print(f"sae {name}: {hook}, {fired:.0%} of features fire, explained "
              f"{float(explained.mean()):.3f}", file=sys.stderr)
    out.write(path)
    print(f"wrote {path}: {len(out.records)} records", file=sys.stderr)



# Attribution graphs (src/graph/graph.h) on random transcoders of the tiny model.
TC_D = 48
GRAPH_PROMPT = [50256, 464, 2068, 7586, 21831, 625, 262]


def bare_ln(x):
    """(x - mean) / sqrt(var + eps), var biased: GPT-2's LayerNorm without gain and bias."""
    return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + LN_EPS)


def inv_sigma(x):
    return 1.0 / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + LN_EPS)


def make_transcoder(l, mid):
    """Random transcoder of block l whose inputs are the stream rows mid [T, C] (resid_mid):
    about a sixth of the features fire, none within 1e-3 of zero (so float32 agrees on which)."""
    rng = np.random.default_rng(fnv1a64(f"transcoder/{l}") & 0xFFFFFFFF)
    C = mid.shape[1]
    W_enc = rng.normal(0, 1 / math.sqrt(C), (C, TC_D)).astype(np.float32)
    W_dec = rng.normal(0, 0.5 / math.sqrt(C), (TC_D, C)).astype(np.float32)
    b_dec = (0.05 * rng.normal(0, 1, C)).astype(np.float32)
    pre = (bare_ln(mid) @ torch.from_numpy(W_enc).double()).numpy()
    spread = pre.std(axis=0) + 1e-6
    b_enc = (-1.0 * spread + 0.1 * spread * rng.normal(0, 1, TC_D)).astype(np.float32)
    margin = np.abs(pre[1:] + b_enc.astype(np.float64)).min()
    assert margin > 1e-3, f"transcoder {l}: a pre-activation within {margin} of zero"
    return {"W_enc": W_enc, "b_enc": b_enc, "W_dec": W_dec, "b_dec": b_dec}


def graph_reference(w, ids, tcs):
    """The graph by autograd through the replacement model, float64. Returns (features, acts,
    logit_ids, logit_p, adjacency, real logits)."""
    wd = {k: v.double() for k, v in w.items()}
    T, C, H = len(ids), N_EMBD, N_HEAD
    D = C // H
    rec = {}
    real_logits = forward(wd, ids, lambda name, t: rec.__setitem__(name, t.detach().clone()))[-1]
    W = [{k: torch.from_numpy(v).double() for k, v in tc.items()} for tc in tcs]
    acts, errs = [], []
    for l in range(N_LAYER):
        a = torch.relu(bare_ln(rec[f"blk{l}/resid_attn"]) @ W[l]["W_enc"] + W[l]["b_enc"])
        acts.append(a)
        errs.append(rec[f"blk{l}/mlp_out"] - (a @ W[l]["W_dec"] + W[l]["b_dec"]))
    features = [(l, p, f) for l in range(N_LAYER) for p in range(1, T) for f in range(TC_D) if acts[l][p, f] > 0]

    # The replacement model, its inputs as leaves: the embedding and, where each MLP output adds,
    # a zero injection (d/d of it: the gradient at the stream where that block's sources write).
    idx = torch.tensor(ids, dtype=torch.long)
    emb0 = wd["token_embd.weight"][idx] + wd["position_embd.weight"][:T]
    emb = emb0.clone().requires_grad_(True)
    x, injs, pres = emb, [], []
    for l in range(N_LAYER):
        p = f"blk.{l}."
        inv1 = inv_sigma(rec[f"blk{l}/resid_pre"])
        h = (x - x.mean(-1, keepdim=True)) * inv1 * wd[p + "attn_norm.weight"] + wd[p + "attn_norm.bias"]
        v = F.linear(h, wd[p + "attn_qkv.weight"][2 * C:], wd[p + "attn_qkv.bias"][2 * C:])
        z = (rec[f"blk{l}/attn_probs"] @ v.view(T, H, D).transpose(0, 1)).transpose(0, 1).reshape(T, C)
        mid = x + F.linear(z, wd[p + "attn_output.weight"], wd[p + "attn_output.bias"])
        n = (mid - mid.mean(-1, keepdim=True)) * inv_sigma(rec[f"blk{l}/resid_attn"])
        pres.append(n @ W[l]["W_enc"])  # the pre-activation without b_enc
        recon = acts[l] @ W[l]["W_dec"] + W[l]["b_dec"]  # frozen
        inj = torch.zeros(T, C, dtype=torch.float64, requires_grad=True)
        injs.append(inj)
        x = mid + recon + errs[l] + inj
    invf = inv_sigma(rec[f"blk{N_LAYER - 1}/resid_out"])
    lnf = (x - x.mean(-1, keepdim=True)) * invf * wd["output_norm.weight"] + wd["output_norm.bias"]
    rep_logits = lnf[-1] @ wd["token_embd.weight"].T
    diff = float((rep_logits - real_logits).abs().max())
    assert diff < 1e-9, f"the replacement model's logits differ from the real ones by {diff}"

    probs = torch.softmax(real_logits, -1)
    top_p, top_i = torch.topk(probs, 10)
    cut = int(torch.searchsorted(torch.cumsum(top_p, 0), 0.95)) + 1
    logit_ids, logit_p = top_i[:cut].tolist(), top_p[:cut]
    unembed = wd["token_embd.weight"]
    demeaned = unembed[logit_ids] - unembed.mean(0)

    nf, L = len(features), N_LAYER
    N = nf + L * T + T + len(logit_ids)
    A = torch.zeros(N, N, dtype=torch.float64)

    def row(q):
        grads = torch.autograd.grad(q, [emb] + injs, retain_graph=True, allow_unused=True)
        g_emb = grads[0] if grads[0] is not None else torch.zeros(T, C, dtype=torch.float64)
        g = [gi if gi is not None else torch.zeros(T, C, dtype=torch.float64) for gi in grads[1:]]
        r = torch.zeros(N, dtype=torch.float64)
        for j, (l, p, f) in enumerate(features):
            r[j] = acts[l][p, f] * (W[l]["W_dec"][f] @ g[l][p])
        for l in range(L):
            r[nf + l * T: nf + (l + 1) * T] = (errs[l] * g[l]).sum(-1)
        r[nf + L * T: nf + L * T + T] = (emb0 * g_emb).sum(-1)
        return r

    for j, (l, p, f) in enumerate(features):
        A[j] = row(pres[l][p, f])
    for i in range(len(logit_ids)):
        A[N - len(logit_ids) + i] = row(lnf[-1] @ demeaned[i])
    feats = np.array(features, np.int32).reshape(-1, 3)
    act_values = np.array([float(acts[l][p, f]) for l, p, f in features], np.float32)
    return feats, act_values, logit_ids, logit_p, A, real_logits


def check_reference(w, ids, tcs, features, logit_id, chosen, value):
    """The check of a graph (src/lab/graph_check.h CheckGraph): features[chosen] set to value.
    Returns (predicted, exact) changes of logit[logit_id] - mean(logits) at the last position.
    predicted: not by the graph's edges but by a forward of the frozen linear replacement model
    itself (attention patterns, 1/sigma and errors frozen at the real run; every active feature at
    p >= 1 linear, its activation its pre-activation; the chosen ones at value).
    exact: the real model with the clamps as an edit of blocks.L.hook_mlp_out, x + (value -
    a_f(n(resid_mid))) W_dec[f], a_f read from this run's resid_mid."""
    wd = {k: v.double() for k, v in w.items()}
    T, C, H = len(ids), N_EMBD, N_HEAD
    D = C // H
    W = [{k: torch.from_numpy(v).double() for k, v in tc.items()} for tc in tcs]
    picked = [tuple(int(v) for v in features[j]) for j in chosen]

    def demeaned(logits):
        return float(logits[-1, logit_id] - logits[-1].mean())

    with torch.no_grad():
        rec = {}
        real = forward(wd, ids, lambda name, t: rec.__setitem__(name, t.clone()))
        edits, seen = [], {}
        for l in sorted({l for l, _, _ in picked}):
            def fn(x, l=l):
                a = torch.relu(bare_ln(seen[l]) @ W[l]["W_enc"] + W[l]["b_enc"])
                x = x.clone()
                for pl, pp, pf in picked:
                    if pl == l:
                        x[pp] += (value - a[pp, pf]) * W[l]["W_dec"][pf]
                return x
            edits.append((l, "mlp_out", fn))
        edited = forward(wd, ids, lambda name, t: seen.__setitem__(int(name[3:name.index("/")]), t.clone())
                         if name.endswith("/resid_attn") else None, iv={"stream_edits": edits})
        exact = demeaned(edited) - demeaned(real)

        active = {(int(l), int(p), int(f)) for l, p, f in features}
        idx = torch.tensor(ids, dtype=torch.long)

        def frozen(clamps):
            x = wd["token_embd.weight"][idx] + wd["position_embd.weight"][:T]
            for l in range(N_LAYER):
                p = f"blk.{l}."
                h = (x - x.mean(-1, keepdim=True)) * inv_sigma(rec[f"blk{l}/resid_pre"]) * wd[p + "attn_norm.weight"] \
                    + wd[p + "attn_norm.bias"]
                v = F.linear(h, wd[p + "attn_qkv.weight"][2 * C:], wd[p + "attn_qkv.bias"][2 * C:])
                z = (rec[f"blk{l}/attn_probs"] @ v.view(T, H, D).transpose(0, 1)).transpose(0, 1).reshape(T, C)
                mid = x + F.linear(z, wd[p + "attn_output.weight"], wd[p + "attn_output.bias"])
                real_a = torch.relu(bare_ln(rec[f"blk{l}/resid_attn"]) @ W[l]["W_enc"] + W[l]["b_enc"])
                lin = (mid - mid.mean(-1, keepdim=True)) * inv_sigma(rec[f"blk{l}/resid_attn"]) @ W[l]["W_enc"] \
                    + W[l]["b_enc"]
                a = real_a.clone()
                for pp in range(1, T):
                    for f in range(TC_D):
                        if (l, pp, f) in active:
                            a[pp, f] = clamps.get((l, pp, f), lin[pp, f])
                err = rec[f"blk{l}/mlp_out"] - (real_a @ W[l]["W_dec"] + W[l]["b_dec"])
                x = mid + a @ W[l]["W_dec"] + W[l]["b_dec"] + err
            lnf = (x - x.mean(-1, keepdim=True)) * inv_sigma(rec[f"blk{N_LAYER - 1}/resid_out"]) \
                * wd["output_norm.weight"] + wd["output_norm.bias"]
            return demeaned(lnf @ wd["token_embd.weight"].T)

        base = frozen({})
        assert abs(base - demeaned(real)) < 1e-9, "the frozen model does not reproduce the real logit"
        predicted = frozen({k: value for k in picked}) - base
    return predicted, exact


def prune_reference(A, logit_p, n_features, n_tokens, node_threshold=0.8, edge_threshold=0.98):
    """circuit-tracer's prune_graph and graph scores, written anew from its description."""
    N = A.shape[0]
    k = len(logit_p)
    w = torch.zeros(N, dtype=torch.float64)
    w[N - k:] = logit_p

    def normalise(m):
        m = m.abs()
        return m / m.sum(1, keepdim=True).clamp(min=1e-10)

    def influence(m):
        total = torch.zeros(N, dtype=torch.float64)
        cur = w @ m
        while cur.any():
            total += cur
            cur = cur @ m
        return total

    def cut(scores, threshold):
        ordered = torch.sort(scores.flatten(), descending=True).values
        share = torch.cumsum(ordered, 0) / ordered.sum()
        i = min(int((share < threshold).sum()), len(ordered) - 1)
        return ordered[i]

    m = normalise(A)
    node_infl = influence(m)
    keep = node_infl >= cut(node_infl, node_threshold)
    keep[N - k - n_tokens:] = True
    pruned = A.clone()
    pruned[~keep] = 0
    pruned[:, ~keep] = 0
    pm = normalise(pruned)
    edge_scores = pm * (influence(pm) + w)[:, None]
    edges = edge_scores >= cut(edge_scores, edge_threshold)
    sources = N - k - n_tokens
    while True:
        before = keep.clone()
        keep[:sources] &= edges[:, :sources].any(0)
        keep[:n_features] &= edges[:n_features].any(1)
        if torch.equal(before, keep):
            break
        edges[~keep] = False
        edges[:, ~keep] = False
    errors = slice(n_features, N - k - n_tokens)
    tokens = slice(N - k - n_tokens, N - k)
    replacement = float(node_infl[tokens].sum() / (node_infl[tokens].sum() + node_infl[errors].sum()))
    weight = node_infl + w
    completeness = float(((1 - m[:, errors].sum(1)) * weight).sum() / weight.sum())
    return keep, node_infl, replacement, completeness


def qk_reference(w, ids, tcs, layer, head, q, k):
    """QK attribution (src/graph/qk.h) of head `head` in block `layer` from position q to k, float64:
    each side's parts of the stream entering the block (kinds as QkPartKind: 0 embedding, 1 an
    earlier block's attention output, 2 a transcoder feature, 3 its decoder bias, 4 its error;
    5 the side's bias), their shares of the score by autograd through the frozen LayerNorm with
    the other side held at the real run's q (or k), and every pair's product. Returns (score,
    (parts, shares) of the query side, of the key side, pairs [nq, nk])."""
    wd = {kk: v.double() for kk, v in w.items()}
    C, H = N_EMBD, N_HEAD
    D = C // H
    rec = {}
    with torch.no_grad():
        forward(wd, ids, lambda name, t: rec.__setitem__(name, t.clone()))
    pre = f"blk.{layer}."
    g, b = wd[pre + "attn_norm.weight"], wd[pre + "attn_norm.bias"]
    W, bias = wd[pre + "attn_qkv.weight"], wd[pre + "attn_qkv.bias"]
    scale = 1.0 / math.sqrt(D)

    def parts_at(pos):
        parts, vecs = [(0, -1, -1)], [rec["embed"][pos]]
        for l in range(layer):
            parts.append((1, l, -1))
            vecs.append(rec[f"blk{l}/attn_out"][pos])
            tc = {kk: torch.from_numpy(v).double() for kk, v in tcs[l].items()}
            acts = torch.relu(bare_ln(rec[f"blk{l}/resid_attn"][pos]) @ tc["W_enc"] + tc["b_enc"])
            err = rec[f"blk{l}/mlp_out"][pos].clone()
            for f in torch.nonzero(acts > 0).flatten().tolist():
                parts.append((2, l, f))
                vecs.append(acts[f] * tc["W_dec"][f])
                err = err - vecs[-1]
            parts.append((3, l, -1))
            vecs.append(tc["b_dec"])
            parts.append((4, l, -1))
            vecs.append(err - tc["b_dec"])
        parts.append((5, -1, -1))
        return parts, torch.stack(vecs)

    def side(pos, part, other):
        """Shares by autograd: the stream as sum_i alpha_i c_i, the bias times beta, all at 1."""
        parts, V = parts_at(pos)
        rows = slice(part * C + head * D, part * C + (head + 1) * D)
        inv = inv_sigma(rec[f"blk{layer}/resid_pre"][pos])
        coef = torch.ones(len(parts), dtype=torch.float64, requires_grad=True)
        x = coef[:-1] @ V
        proj = ((x - x.mean()) * inv * g) @ W[rows].T + coef[-1] * (b @ W[rows].T + bias[rows])
        (scale * proj @ other).backward()
        n = (V - V.mean(-1, keepdim=True)) * inv * g
        projected = torch.cat([n @ W[rows].T, (b @ W[rows].T + bias[rows])[None]])
        return parts, coef.grad.detach(), projected

    qv, kv = rec[f"blk{layer}/q"][head, q], rec[f"blk{layer}/k"][head, k]
    qparts, qshares, qproj = side(q, 0, kv)
    kparts, kshares, kproj = side(k, 1, qv)
    score = float(rec[f"blk{layer}/attn_scores"][head, q, k])
    return score, (qparts, qshares), (kparts, kshares), scale * qproj @ kproj.T


def write_graph(w, directory, path):
    import os
    ids = GRAPH_PROMPT
    rec = {}
    with torch.no_grad():
        forward({k: v.double() for k, v in w.items()}, ids, lambda name, t: rec.__setitem__(name, t.clone()))
    tcs = []
    for l in range(N_LAYER):
        tc = make_transcoder(l, rec[f"blk{l}/resid_attn"])
        tcs.append(tc)
        folder = f"{directory}/gpt2-small-dun-chl-mlp-tc{l}"
        os.makedirs(folder, exist_ok=True)
        with open(f"{folder}/sae.json", "w") as f:
            json.dump({"d_in": N_EMBD, "d_out": N_EMBD, "d_sae": TC_D, "is_transcoder": True,
                       "hook_point": f"blocks.{l}.ln2.hook_normalized",
                       "out_hook_point": f"blocks.{l}.hook_mlp_out"}, f, indent=2)
            f.write("\n")
        write_safetensors(f"{folder}/sae.safetensors", tc)
    feats, acts, logit_ids, logit_p, A, logits = graph_reference(w, ids, tcs)
    keep, infl, replacement, completeness = prune_reference(A, logit_p, len(feats), len(ids))
    out = GoldenWriter()
    out.add("graph/ids", np.array(ids, np.int32))
    out.add("graph/features", feats)
    out.add("graph/activations", acts)
    out.add("graph/logit_ids", np.array(logit_ids, np.int32))
    out.add("graph/logit_probs", logit_p.numpy().astype(np.float32))
    out.add("graph/adjacency", A.numpy().astype(np.float32))
    out.add("graph/influence", infl.numpy().astype(np.float32))
    out.add("graph/node_mask", keep.numpy().astype(np.int32))
    out.add("graph/scores", np.array([replacement, completeness], np.float32))
    out.add("graph/logits", logits.numpy().astype(np.float32))
    # The check: the two features with the largest edges into the first logit, ablated and clamped.
    first_logit = A.shape[0] - len(logit_ids)
    chosen = sorted(torch.argsort(A[first_logit, :len(feats)].abs(), descending=True)[:2].tolist())
    values = [0.0, 1.5]
    checks = [check_reference(w, ids, tcs, feats, logit_ids[0], chosen, v) for v in values]
    out.add("graph/check_nodes", np.array(chosen, np.int32))
    out.add("graph/check_values", np.array(values, np.float32))
    out.add("graph/check_predicted", np.array([c[0] for c in checks], np.float32))
    out.add("graph/check_exact", np.array([c[1] for c in checks], np.float32))
    # A feature's card: the first check node's feature over every position, its decoder's top and
    # bottom tokens through ln_f's weight and the unembedding (ties: the lower id, as torch.sort
    # stable on the negated weights).
    cl, _, cf = (int(v) for v in feats[chosen[0]])
    wd = {k: v.double() for k, v in w.items()}
    rec = {}
    with torch.no_grad():
        forward(wd, ids, lambda name, t: rec.__setitem__(name, t.clone()))
        tcw = {k: torch.from_numpy(v).double() for k, v in tcs[cl].items()}
        card_acts = torch.relu(bare_ln(rec[f"blk{cl}/resid_attn"]) @ tcw["W_enc"][:, cf] + tcw["b_enc"][cf])
        weights = (tcw["W_dec"][cf] * wd["output_norm.weight"]) @ wd["token_embd.weight"].T
    promoted = torch.sort(-weights, stable=True).indices[:5]
    suppressed = torch.sort(weights, stable=True).indices[:5]
    out.add("graph/card_feature", np.array([cl, cf], np.int32))
    out.add("graph/card_activations", card_acts.numpy().astype(np.float32))
    out.add("graph/card_promoted", promoted.numpy().astype(np.int32))
    out.add("graph/card_suppressed", suppressed.numpy().astype(np.int32))
    out.add("graph/card_weights", torch.cat([weights[promoted], weights[suppressed]]).numpy().astype(np.float32))
    # QK attribution of head 1.2 from the last position to position 1.
    spec = [1, 2, len(ids) - 1, 1]
    score, (qparts, qshares), (kparts, kshares), pairs = qk_reference(w, ids, tcs, *spec)
    out.add("graph/qk_spec", np.array(spec, np.int32))
    out.add("graph/qk_score", np.array([score], np.float32))
    out.add("graph/qk_query_parts", np.array(qparts, np.int32))
    out.add("graph/qk_query_shares", qshares.numpy().astype(np.float32))
    out.add("graph/qk_key_parts", np.array(kparts, np.int32))
    out.add("graph/qk_key_shares", kshares.numpy().astype(np.float32))
    out.add("graph/qk_pairs", pairs.numpy().astype(np.float32))
    # A group's check (a supernode's features at once): the three block-1 features with the largest
    # edges into the first logit, and for each the block-0 features with the largest edge into it
    # at its own position and at an earlier one (through attention), so that members feed members,
    # which the group holds at the value all the same.
    top = [int(j) for j in torch.argsort(A[first_logit, :len(feats)].abs(), descending=True) if feats[j][0] == 1][:3]
    group = set(top)
    for j in top:
        for same in (True, False):
            into = [(abs(float(A[j, s])), s) for s in range(len(feats))
                    if feats[s][0] == 0 and (feats[s][1] == feats[j][1]) == same and A[j, s] != 0]
            if into:
                group.add(max(into)[1])
    group = sorted(group)
    group_values = [0.0, 2.0]
    group_checks = [check_reference(w, ids, tcs, feats, logit_ids[0], group, v) for v in group_values]
    out.add("graph/group_nodes", np.array(group, np.int32))
    out.add("graph/group_values", np.array(group_values, np.float32))
    out.add("graph/group_predicted", np.array([c[0] for c in group_checks], np.float32))
    out.add("graph/group_exact", np.array([c[1] for c in group_checks], np.float32))
    print(f"graph group check of nodes {group} ({[tuple(int(v) for v in feats[j]) for j in group]}): "
          f"(predicted, exact) {group_checks}", file=sys.stderr)
    print(f"graph check of nodes {chosen}: (predicted, exact) {checks}; QK score {score:.4f} from "
          f"{float(qshares.sum()):.4f} (query side), {float(kshares.sum()):.4f} (key side), "
          f"{float(pairs.sum()):.4f} (pairs)", file=sys.stderr)
    out.write(path)
    print(f"graph: {len(feats)} features, {len(logit_ids)} logits, {int(keep.sum())} of {len(keep)} nodes kept, "
          f"replacement {replacement:.3f}, completeness {completeness:.3f}; wrote {path}", file=sys.stderr)



# Feature dashboards (src/lab/dashboard.h) on the test transcoders and an SAE of the tiny model,
# over a small corpus tokenized here by GPT-2's BPE (OpenAI's encoder.py algorithm) with the
# vocabulary and merges of the committed small model's file.
DASH_DOCUMENTS = [
    "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs on.\n"
    "Foxes and dogs: the same story, told twice, and then the story again.",
    "Caf\u00e9 cr\u00e8me \u2014 a r\u00e9sum\u00e9 of na\u00efve d\u00e9j\u00e0 vu \U0001F642 with "
    "\"quoted\" words,\ttabs and a back\\slash.",
    "import os\nfor i in range(10):\n    print(i * i)  # squares\n",
    "Licence text: Permission is hereby granted, free of charge, to any person obtaining a copy "
    "of this software. THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND.",
    "A line that mentions <|endoftext|> in the middle is plain text, not a separator.",
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty, and one two three four five again.",
    "Numbers 3.14159, 2.71828 and 1,000,000; dates 2026-12-07; e-mail someone@example.org.",
]
DASH_CASES = {
    # name: dictionary, corpus file, context, max_tokens (-1: all), top, bands, per_band, seed,
    #       features ([(layer, index)]; None: every feature of every block)
    "transcoders": ("transcoders", "corpus.jsonl", 16, -1, 5, 3, 2, 7, None),
    "sae": ("sae/standard", "corpus.txt", 24, 200, 4, 4, 3, 11,
            [(1, f) for f in (0, 3, 7, 20, 41, 66, 95)]),
}
DASH_BINS = 50
DASH_LOGIT_TOKENS = 10
# Margins the float32 engine must clear to agree with float64 on which side of a threshold a
# number falls: whether a feature fires (its pre-activation, absolute), a window's band and the
# order of top windows (relative to the feature's max). A histogram counts thousands of values,
# some of which do fall that near a bin's edge: those are counted in both bins' upper bounds.
DASH_MARGIN = 1e-5
TINY_GGUF = "weights/gpt2-tiny-q8_0.gguf"


def gguf_tokenizer(path):
    """tokenizer.ggml.tokens and tokenizer.ggml.merges of a GGUF (ggml/docs/gguf.md), read here."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("Q")
        s = data[pos:pos + n].decode("utf-8")
        pos += n
        return s

    sizes = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(sizes[t])

    assert data[:4] == b"GGUF"
    pos = 4
    take("I")
    take("Q")
    n_kv = take("Q")
    kv = {}
    for _ in range(n_kv):
        key = string()
        kv[key] = value(take("I"))
    return kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.merges"]


class DashBpe:
    """GPT-2's byte-level BPE as OpenAI's encoder.py: the pre-tokenizer's pieces, then the
    lowest-ranked merge first."""

    def __init__(self, tokens, merges):
        import regex
        from gpt2_bytes import bytes_to_unicode
        self.pat = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
        self.encoder = {}
        for i, t in enumerate(tokens):
            self.encoder.setdefault(t, i)
        self.ranks = {tuple(m.split(" ")): i for i, m in enumerate(merges)}
        self.byte_encoder = bytes_to_unicode()
        self.byte_decoder = {c: b for b, c in self.byte_encoder.items()}
        self.tokens = tokens

    def bpe(self, word):
        word = list(word)
        while len(word) > 1:
            rank, i = min((self.ranks.get((a, b), math.inf), i) for i, (a, b) in enumerate(zip(word, word[1:])))
            if rank == math.inf:
                break
            first, second = word[i], word[i + 1]
            out, i = [], 0
            while i < len(word):
                if i < len(word) - 1 and word[i] == first and word[i + 1] == second:
                    out.append(first + second)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            word = out
        return [self.encoder[p] for p in word]

    def encode(self, text):
        ids = []
        for piece in self.pat.findall(text):
            ids.extend(self.bpe("".join(self.byte_encoder[b] for b in piece.encode("utf-8"))))
        return ids

    def token_bytes(self, i):
        return bytes(self.byte_decoder[c] for c in self.tokens[i])


def write_dash_corpus(directory):
    """The same documents as .jsonl (json.dumps: \\uXXXX escapes, surrogate pairs, an extra key,
    a blank line) and as .txt (<|endoftext|> lines between them)."""
    import os
    os.makedirs(directory, exist_ok=True)
    with open(f"{directory}/corpus.jsonl", "w", encoding="utf-8") as f:
        for i, d in enumerate(DASH_DOCUMENTS):
            f.write(json.dumps({"id": i, "text": d}) + "\n")
            if i == 2:
                f.write("\n")
    with open(f"{directory}/corpus.txt", "w", encoding="utf-8", newline="") as f:
        # A document's last newline belongs to the separator's line: one ending in "\n" gets a
        # blank line before it.
        f.write("\n<|endoftext|>\n".join(DASH_DOCUMENTS) + "\n")


def read_dash_corpus(path):
    """Documents of a corpus file by lab/corpus.h's rules, written anew here."""
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".jsonl"):
        return [d for d in (json.loads(l)["text"] for l in data.split(b"\n") if l.strip()) if d]
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the file's last newline ends its last line
    docs, current = [], []
    for line in lines:
        if line.rstrip(b"\r") == b"<|endoftext|>":
            docs.append(b"\n".join(current))
            current = []
        else:
            current.append(line)
    docs.append(b"\n".join(current))
    return [d.decode("utf-8") for d in docs if d]


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = torch.from_numpy(np.frombuffer(data[a:b], dtype="<f4").reshape(v["shape"]).copy()).double()
    return out


def dash_band(m, mx, bands):
    """lab/dashboard.h DashboardBand: the b with mx*b/bands < m <= mx*(b+1)/bands (doubles)."""
    edge = [mx * b / bands for b in range(bands)] + [mx]
    for b in range(bands):
        if edge[b] < m <= edge[b + 1]:
            return b
    raise AssertionError(f"{m} is outside (0, {mx}]")


def dash_near_edge(v, mx, bands):
    return min(abs(v - mx * b / bands) for b in range(1, bands)) < DASH_MARGIN * mx if bands > 1 else False


def band_sample(seed, layer, feature, band, n, per_band):
    """lab/dashboard.h BandSample: SplitMix64 (model/sampler.h Rng), partial Fisher-Yates."""
    places = list(range(n))
    if n <= per_band:
        return places
    state = (seed ^ (layer << 48) ^ (feature << 8) ^ band) & MASK64

    def next_u64():
        nonlocal state
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    for i in range(per_band):
        j = i + next_u64() % (n - i)
        places[i], places[j] = places[j], places[i]
    return sorted(places[:per_band])


def dash_reference(w, bpe, case):
    dictionary, corpus, context, max_tokens, top, bands, per_band, seed, chosen = DASH_CASES[case]
    docs = read_dash_corpus(f"tests/data/dashboard/{corpus}")
    assert docs == DASH_DOCUMENTS, f"{corpus}: the reader's documents differ from those written"
    ids, starts = [], []
    for d in docs:
        t = bpe.encode(d)
        if max_tokens >= 0:
            t = t[:max(0, max_tokens - len(ids))]
        starts.extend(len(ids) + b for b in range(0, len(t), context))
        ids.extend(t)
    windows = [ids[a:b] for a, b in zip(starts, starts[1:] + [len(ids)])]
    # The dictionary's blocks: (layer, hook, encode(x [T, C]) -> [T, S], W_dec [S, C]).
    blocks = []
    if dictionary == "transcoders":
        for l in range(N_LAYER):
            tc = read_safetensors(f"tests/data/transcoders/gpt2-small-dun-chl-mlp-tc{l}/sae.safetensors")
            blocks.append((l, f"blk{l}/resid_attn",
                           lambda x, tc=tc: bare_ln(x) @ tc["W_enc"] + tc["b_enc"], tc["W_dec"]))
    else:
        name = dictionary.split("/")[1]
        hook = SAES[name][0]
        wt = read_safetensors(f"tests/data/{dictionary}/sae_weights.safetensors")
        _, apply_b_dec, norm = SAES[name][2], SAES[name][3], SAES[name][4]
        assert SAES[name][1] == "standard"
        blocks.append((int(hook.split(".")[1]), hook,
                       lambda x: sae_input(x, wt["b_dec"], apply_b_dec, norm)[0] @ wt["W_enc"] + wt["b_enc"],
                       wt["W_dec"]))
    wd = {k: v.double() for k, v in w.items()}
    pre = {l: [] for l, *_ in blocks}  # per block, per window: pre-activations [n, S]
    for win in windows:
        rec = {}
        forward(wd, [50256] + win, lambda name, t: rec.__setitem__(name, t.clone()))
        for l, hook, encode, _ in blocks:
            x = sae_hook_tensor(rec, hook) if hook.startswith("blocks.") else rec[hook]
            pre[l].append(encode(x)[1:])
    features = chosen or [(l, f) for l, *_ in blocks for f in range(blocks[0][3].shape[0])]
    n_tokens = len(ids)
    out = {"features": [], "frac": [], "max": [], "hist": [], "hist_hi": [], "pos_ids": [], "pos_values": [],
           "neg_ids": [], "neg_values": [], "records": [], "record_bins": [], "record_max": [],
           "record_values": []}
    gamma, wte = wd["output_norm.weight"], wd["token_embd.weight"]
    for row, (l, f) in enumerate(features):
        p = [a[:, f] for a in pre[l]]
        assert all(float(v.abs().min()) > DASH_MARGIN for v in p), f"{case} {l}_{f}: a pre-activation near 0"
        acts = [torch.relu(v) for v in p]
        wmax = [float(a.max()) for a in acts]
        mx = max(wmax)
        nonzero = sum(int((a > 0).sum()) for a in acts)
        out["features"].append([l, f])
        out["frac"].append(nonzero / n_tokens)
        out["max"].append(mx)
        W_dec = dict((b[0], b[3]) for b in blocks)[l]
        weights = (W_dec[f] * gamma) @ wte.T
        promoted = torch.sort(-weights, stable=True).indices[:DASH_LOGIT_TOKENS + 1]
        suppressed = torch.sort(weights, stable=True).indices[:DASH_LOGIT_TOKENS + 1]
        for order in (promoted, suppressed):
            gaps = (weights[order][1:] - weights[order][:-1]).abs()
            assert float(gaps.min()) > 1e-6, f"{case} {l}_{f}: logit weights too close to order"
        out["pos_ids"].append(promoted[:DASH_LOGIT_TOKENS].tolist())
        out["pos_values"].append(weights[promoted[:DASH_LOGIT_TOKENS]].tolist())
        out["neg_ids"].append(suppressed[:DASH_LOGIT_TOKENS].tolist())
        out["neg_values"].append(weights[suppressed[:DASH_LOGIT_TOKENS]].tolist())
        hist, hist_hi = [0] * DASH_BINS, [0] * DASH_BINS
        firing = [i for i, m in enumerate(wmax) if m > 0]
        if mx > 0:
            for a in acts:
                for v in a[a > 0].tolist():
                    b = dash_band(v, mx, DASH_BINS)
                    hist_hi[b] += 1
                    if not dash_near_edge(v, mx, DASH_BINS):
                        hist[b] += 1
                    elif v - mx * b / DASH_BINS < DASH_MARGIN * mx:
                        hist_hi[b - 1] += 1
                    else:
                        hist_hi[b + 1] += 1
        out["hist"].append(hist)
        out["hist_hi"].append(hist_hi)
        # Distinct window maxima far enough apart to rank the same in float32.
        ranked = sorted(firing, key=lambda i: (-wmax[i], i))
        for a, b in zip(ranked, ranked[1:]):
            assert wmax[a] - wmax[b] > DASH_MARGIN * mx or wmax[a] == wmax[b], f"{case} {l}_{f}: close maxima"

        def record(i, kind, band, lo, hi, contains):
            a = acts[i].tolist()
            first = a.index(max(a))
            others = [v for j, v in enumerate(a) if j != first]
            assert not others or a[first] - max(others) > DASH_MARGIN * a[first] or a[first] in others
            out["records"].append([row, i, first, contains, kind, band])
            out["record_bins"].append([lo, hi])
            out["record_max"].append(wmax[i])
            out["record_values"].append(a + [0.0] * (context - len(a)))

        for i in ranked[:top]:
            record(i, 0, -1, -1.0, -1.0, len(firing))
        members = [[] for _ in range(bands)]
        for i in firing:
            assert not dash_near_edge(wmax[i], mx, bands), f"{case} {l}_{f}: a window's max near a band edge"
            members[dash_band(wmax[i], mx, bands)].append(i)
        for b in range(bands):
            for k in band_sample(seed, l, f, b, len(members[b]), per_band):
                record(members[b][k], 1, b, mx * b / bands, mx * (b + 1) / bands, len(members[b]))
    dead = sum(1 for m in out["max"] if m == 0)
    print(f"dashboard {case}: {len(windows)} windows, {n_tokens} tokens, {len(features)} features "
          f"({dead} never fire), {len(out['records'])} windows listed", file=sys.stderr)
    return ids, starts, out, (context, max_tokens, top, bands, per_band, seed)


# Byte strings and what Python's bytes.decode("utf-8", "replace") makes of them (base/text.h
# ValidUtf8, a token's text in the dashboard's file).
UTF8_CASES = [b"plain", b"caf\xc3\xa9", b"\xc3", b"\xe2\x82", b"\xe2\x82\xac", b"\xf0\x9f\x99\x82",
              b"\xf0\x9f\x99", b"\x80\x80", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
              b"a\xffb", b"\xe0\x80\x80", b"\xf0\x80", b"\xc3\x28", b"\xf1\x80\x80\xc3\xa9"]


def write_dashboard(w, directory, path):
    """tests/data/dashboard/corpus.{jsonl,txt} and golden_dashboard.bin:
        utf8/<k>/in, utf8/<k>/out   i32 [n]  bytes, and their decode with errors="replace" as UTF-8
        dash/<case>/options   i32 [6]  context, max_tokens, top, bands, per_band, seed
        dash/<case>/ids       i32 [N]  the corpus's tokens; window_starts i32 [W]
        dash/<case>/features  i32 [F, 2] layer, index
        dash/<case>/frac, max f32 [F]
        dash/<case>/hist, hist_hi i32 [F, 50]  the histogram's counts, at least and at most: a value
                              within DASH_MARGIN * max of a bin's edge counts in hist_hi on both
                              sides and in neither in hist
        dash/<case>/pos_ids, neg_ids i32 [F, 10]; pos_values, neg_values f32 [F, 10]
                              (W_dec[f] * ln_f.weight) @ wte^T's largest and smallest, ties to the
                              lower id
        dash/<case>/records   i32 [R, 6]  feature row, window, max token index, binContains,
                              kind (0 top, 1 band), band (-1 for a top window); in the file's
                              order
        dash/<case>/record_bins f32 [R, 2] binMin, binMax; record_max f32 [R];
        dash/<case>/record_values f32 [R, context]  per token (zeros past the window's end)"""
    write_dash_corpus(directory)
    tokens, merges = gguf_tokenizer(TINY_GGUF)
    bpe = DashBpe(tokens, merges)
    out = GoldenWriter()
    for k, b in enumerate(UTF8_CASES):
        out.add(f"utf8/{k}/in", np.array(list(b), np.int32))
        out.add(f"utf8/{k}/out", np.array(list(b.decode("utf-8", "replace").encode("utf-8")), np.int32))
    with torch.no_grad():
        for case in DASH_CASES:
            ids, starts, ref, options = dash_reference(w, bpe, case)
            out.add(f"dash/{case}/options", np.array(options, np.int32))
            out.add(f"dash/{case}/ids", np.array(ids, np.int32))
            out.add(f"dash/{case}/window_starts", np.array(starts, np.int32))
            for key in ("features", "hist", "hist_hi", "pos_ids", "neg_ids", "records"):
                out.add(f"dash/{case}/{key}", np.array(ref[key], np.int32))
            for key in ("frac", "max", "pos_values", "neg_values", "record_bins", "record_max",
                        "record_values"):
                out.add(f"dash/{case}/{key}", np.array(ref[key], np.float32))
    out.write(path)
    print(f"wrote {path}: {len(out.records)} records", file=sys.stderr)


class GoldenWriter:
    def __init__(self):
        self.records = []

    def add(self, name, array):
        array = np.ascontiguousarray(array)
        if array.dtype == np.float32:
            dtype = 0
        elif array.dtype == np.int32:
            dtype = 1
        else:
            raise ValueError(f"{name}: unsupported dtype {array.dtype}")
        self.records.append((name, dtype, array))

    def write(self, path):
        with open(path, "wb") as f:
            f.write(b"GPT2GOLD")
            f.write(struct.pack("<II", 1, len(self.records)))
            for name, dtype, array in self.records:
                encoded = name.encode("utf-8")
                f.write(struct.pack("<I", len(encoded)))
                f.write(encoded)
                f.write(struct.pack("<II", dtype, array.ndim))
                f.write(struct.pack(f"<{array.ndim}q", *array.shape))
                f.write(array.astype(array.dtype.newbyteorder("<")).tobytes())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="tests/data/golden_tiny.bin")
    parser.add_argument("--interventions-output", default="tests/data/golden_interventions.bin")
    parser.add_argument("--heads-output", default="tests/data/golden_circuits_heads.bin")
    parser.add_argument("--path-patch-output", default="tests/data/golden_path_patch.bin")
    parser.add_argument("--gradients-output", default="tests/data/golden_gradients.bin")
    parser.add_argument("--sae-dir", default="tests/data/sae")
    parser.add_argument("--sae-output", default="tests/data/golden_sae.bin")
    parser.add_argument("--only-sae", action="store_true", help="write only the SAEs and golden_sae.bin")
    parser.add_argument("--transcoder-dir", default="tests/data/transcoders")
    parser.add_argument("--graph-output", default="tests/data/golden_graph.bin")
    parser.add_argument("--only-graph", action="store_true",
                        help="write only the transcoders and golden_graph.bin")
    parser.add_argument("--dashboard-dir", default="tests/data/dashboard")
    parser.add_argument("--dashboard-output", default="tests/data/golden_dashboard.bin")
    parser.add_argument("--only-dashboard", action="store_true",
                        help="write only the dashboard's corpus and golden_dashboard.bin")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(2)

    weights_np = build_weights()
    w = {k: torch.from_numpy(v) for k, v in weights_np.items()}
    if args.only_graph:
        write_graph(w, args.transcoder_dir, args.graph_output)
        return
    if args.only_dashboard:
        write_dashboard(w, args.dashboard_dir, args.dashboard_output)
        return
    if args.only_sae:
        with torch.no_grad():
            write_saes(w, args.sae_dir, args.sae_output)
        return
    out = GoldenWriter()
    out.add("config", np.array([N_VOCAB, N_CTX, N_EMBD, N_HEAD, N_LAYER, N_FF, SEED], np.int32))
    for name in CHECKSUM_TENSORS:
        flat = weights_np[name].reshape(-1)
        f64 = flat.astype(np.float64)
        out.add("checksum/" + name,
                np.concatenate([[f64.sum(), (f64 * f64).sum()], flat[:8]]).astype(np.float32))

    with torch.no_grad():
        for key, ids in PROMPTS.items():
            out.add(key + "/ids", np.array(ids, np.int32))
            observed = {}
            forward(w, ids, lambda name, t: observed.__setitem__(name, t.detach().clone()))
            for name, t in observed.items():
                out.add(f"{key}/{name}", t.numpy().astype(np.float32))
            residuals = [observed[f"blk{l}/resid_out"] for l in range(N_LAYER)]
            lens_ids, lens_probs = logit_lens(w, residuals)
            out.add(key + "/lens_ids", lens_ids.astype(np.int32))
            out.add(key + "/lens_probs", lens_probs.astype(np.float32))

        ids = list(PROMPTS[GREEDY_PROMPT])
        greedy = []
        for _ in range(GREEDY_STEPS):
            logits = forward(w, ids)
            # argmax returns the first maximum: ties go to the lowest id, as our sampler.
            next_id = int(torch.argmax(logits[-1]))
            greedy.append(next_id)
            ids.append(next_id)
        out.add(GREEDY_PROMPT + "/greedy", np.array(greedy, np.int32))

        write_interventions(w, args.interventions_output)
        write_heads(w, args.heads_output)
        write_path_patch(w, args.path_patch_output)
        write_saes(w, args.sae_dir, args.sae_output)
    write_gradients(w, args.gradients_output)  # autograd: outside no_grad
    write_graph(w, args.transcoder_dir, args.graph_output)
    write_dashboard(w, args.dashboard_dir, args.dashboard_output)

    out.write(args.output)
    print(f"wrote {args.output}: {len(out.records)} records; greedy {greedy}", file=sys.stderr)


if __name__ == "__main__":
    main()
