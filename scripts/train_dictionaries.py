#!/usr/bin/python3
"""Trains the small model's dictionaries: weights/gpt2-tiny-transcoders.gguf (an MLP transcoder
for each of its 4 blocks) and weights/gpt2-tiny-sae-blocks.2.hook_resid_pre.gguf (a residual
stream SAE where block 2, the induction head's, reads the stream), and measures their figures
(weights/README.md).

The dictionaries learn from the committed model itself: weights/gpt2-tiny-q8_0.gguf dequantized
to float32 (scripts/train_tiny.py's forward, the Hugging Face GPT-2 layout), run over the text the
model trained on (train_tiny.py's corpus(): the licence texts and the Python documentation but its
held-out pages). Every figure is measured on the held-out pages, which neither the model nor the
dictionaries saw, and again on tests/data/tiny_heldout.txt alone, the text
tests/sae/tiny_dictionaries_test.cc runs through our engine to recompute them.

  Transcoders (the public GPT-2 small set's convention, sae/sae_config.h TranscoderConfigFromJson):
      n = (x - mean(x)) / sqrt(var(x) + 1e-5)   of x = blocks.L.hook_resid_mid (no gain, no bias)
      f = relu(n @ W_enc + b_enc);  out = f @ W_dec + b_dec  stands in for blocks.L.hook_mlp_out
  SAE (SAELens "standard", normalize_activations "none", apply_b_dec_to_input true, on the centred
  stream as sae/sae.h's header says):
      xc = x - mean_d(x);  f = relu((xc - b_dec) @ W_enc + b_enc);  xc_hat = f @ W_dec + b_dec

Training (train()): Adam on batches of rows drawn from the cached activations (301,568 tokens),
the loss the squared error over the target's total variance (the FVU itself). The first half of the
steps trains a TopK dictionary (k = --target-l0), whose features that fired on no row of the last
200 steps are re-initialised toward rows it reconstructs worst; the second half a ReLU one, each
feature's bias steered so that it fires as often as it did among the top k (L0 stays near k with no
penalty to tune: an L1 penalty steered to that L0 left two thirds of the features dead); last, the
decoder is refitted by least squares. Activations are those of windows of 128 tokens, each run as
[<|endoftext|>] + window (as `gpt2 dashboard` runs its windows); the <|endoftext|> row counts
nowhere: not in training, not in the figures, and the splices leave it as the model made it.

The figures (a dictionary's FVU is sum |y - y_hat|^2 / sum |y - mean(y)|^2 over the tokens; L0 the
mean number of features > 0 a token; dead the fraction of features > 0 on no token of that text):
  - for each block's transcoder, the FVU of hook_mlp_out, L0 and dead; the next-token loss with
    every block's MLP output replaced by its transcoder's at once (positions after the first),
    against the model's own and against every MLP output zero-ablated there:
    recovered = (L_ablated - L_spliced) / (L_ablated - L_model);
  - for the SAE, the FVU of the centred stream, L0, dead, and the loss with the stream replaced
    by its reconstruction (plus the row's mean, which every LayerNorm removes anyway) against the
    model's and the stream zero-ablated there (SAELens's CE loss score).
They are measured on the converted GGUF files read back (their F16 encoders and transcoder
decoders dequantized), so they are the committed files' figures; the test recomputes them there
with our engine (which runs the Q8_0 model with int8 activations, as the page does).

Deterministic: fixed seeds and data order (the result still depends on the BLAS library's
rounding). Not run in CI. Needs /usr/bin/python3 with python3-torch, python3-regex and
python3.11-doc (the training text; the tokenizer is read from the model's GGUF), and a native
build of gpt2 and gpt2-convert. With OpenBLAS given to these processes alone (see train_tiny.py),
the committed files were made by (times on this project's shared 2-core machine):

  export LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread OPENBLAS_NUM_THREADS=1
  P="nice -n 10 /usr/bin/python3 scripts/train_dictionaries.py --out build/dictionaries"
  $P --check-engine        # the activations against build/native/gpt2's (gpt2 inspect)
  $P --only cache          # tokens and activations into build/dictionaries/acts.pt, ~3 min
  $P --only tc0,tc1,tc2 & $P --only tc3,sae; wait   # one thread each, side by side, ~9 min
  $P                       # converts (gpt2-convert --type f16) and measures, ~5 min
  cp build/dictionaries/gpt2-tiny-transcoders.gguf \\
     build/dictionaries/gpt2-tiny-sae-blocks.2.hook_resid_pre.gguf weights/

(Without --only one run trains every dictionary in turn.) --eval-only measures the files already
converted in --out. The log (--out/log.txt) ends with the figures as weights/README.md and the
test state them; --out/test_figures.json holds the test's.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_tiny as tt  # noqa: E402

ROOT = tt.ROOT
EOT = tt.EOT
WINDOW = 128  # text tokens a window; each runs as [EOT] + window
SAE_LAYER = 2
SAE_HOOK = f"blocks.{SAE_LAYER}.hook_resid_pre"
TC_FILE = "gpt2-tiny-transcoders.gguf"
SAE_FILE = f"gpt2-tiny-sae-{SAE_HOOK}.gguf"
TEST_WINDOWS = 3  # windows of tests/data/tiny_heldout.txt the native test runs


class GgufBpe(tt.Gpt2Bpe):
    """train_tiny's tokenizer with the vocabulary and merges the model's GGUF carries (the same
    as GPT-2's encoder.json and vocab.bpe)."""

    def __init__(self, meta):
        self.encoder = {t: i for i, t in enumerate(meta["tokenizer.ggml.tokens"])}
        self.ranks = {tuple(m.split(" ")): i for i, m in enumerate(meta["tokenizer.ggml.merges"])}
        self.byte_encoder = tt.bytes_to_unicode()
        self.cache = {}


def load_model(path):
    meta, _ = tt.gguf_tensors(path)
    p = tt.read_gguf(path)
    cfg = {"n_embd": meta["gpt2.embedding_length"], "n_head": meta["gpt2.attention.head_count"],
           "n_layer": meta["gpt2.block_count"], "layer_norm_epsilon": 1e-5}
    return p, cfg, GgufBpe(meta)


def windows(ids):
    """[n, 1 + WINDOW] rows, [EOT] + each whole window of WINDOW tokens of ids, in order."""
    n = len(ids) // WINDOW
    body = torch.as_tensor(ids[:n * WINDOW], dtype=torch.long).view(n, WINDOW)
    return torch.cat([torch.full((n, 1), EOT, dtype=torch.long), body], 1)


def bare_ln(x):
    return F.layer_norm(x, (x.shape[-1],), eps=1e-5)


def centred(x):
    return x - x.mean(-1, keepdim=True)


# ---------------------------------------------------------------- activations
def collect(p, cfg, rows, batch=32):
    """The training rows of every block: bare LayerNorm of resid_mid and mlp_out [N, C] per
    block, the SAE's centred stream [N, C]; positions after the first of each window."""
    L = cfg["n_layer"]
    tc_in = [[] for _ in range(L)]
    tc_out = [[] for _ in range(L)]
    sae_in = []

    def hook(name, l, t):
        body = t[:, 1:].reshape(-1, t.shape[-1])
        if name == "resid_mid":
            tc_in[l].append(bare_ln(body))
        elif name == "mlp_out":
            tc_out[l].append(body.clone())
        elif name == "resid_pre" and l == SAE_LAYER:
            sae_in.append(centred(body))
        return t

    with torch.no_grad():
        for i in range(0, len(rows), batch):
            tt.forward(p, cfg, rows[i:i + batch], hook=hook, logits=False)
    return ([torch.cat(a) for a in tc_in], [torch.cat(a) for a in tc_out], torch.cat(sae_in))


def check_engine(model, p, cfg, bpe, say, prompt="The tutorial shows how to write a Python module: import it"):
    """The activations trained on against our engine's: `gpt2 inspect` (the Q8_0 model, int8
    activations) on a prompt, each block's resid_pre, resid_mid and mlp_out: the largest
    difference over the tensor's RMS, and the relative error |engine - ours| / |ours|."""
    out = os.path.join(ROOT, "build/dictionaries_inspect.json")
    subprocess.run([os.path.join(ROOT, "build/native/gpt2"), "inspect", "--model", model,
                    "--prompt", prompt, "--json", out], check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        engine = json.load(f)
    ids = torch.tensor([engine["ids"]])
    if engine["ids"] != bpe.encode(prompt):
        raise SystemExit("the engine's tokens differ from the script's")
    ours = {}
    names = {"resid_pre": "resid_pre", "resid_mid": "resid_attn", "mlp_out": "mlp_out"}

    def hook(name, l, t):
        ours[(names[name], l)] = t[0]
        return t

    with torch.no_grad():
        tt.forward(p, cfg, ids, hook=hook, logits=False)
    worst, worst_rel = 0.0, 0.0
    for t in engine["tensors"]:
        key = (t["name"], t["layer"])
        if key in ours:
            e, o = torch.tensor(t["data"]).view(ours[key].shape), ours[key]
            worst = max(worst, ((e - o).abs().max() / o.pow(2).mean().sqrt()).item())
            worst_rel = max(worst_rel, ((e - o).norm() / o.norm()).item())
    say(f"activations against the engine's (gpt2 inspect, {ids.shape[1]} tokens, resid_pre, "
        f"resid_mid, mlp_out of every block): largest difference {worst:.4f} of the tensor's RMS, "
        f"relative error at most {worst_rel:.4f}")
    return worst


# ---------------------------------------------------------------- training
class Dictionary(torch.nn.Module):
    """f = relu((x - b_dec * apply) @ W_enc + b_enc), or its k largest (topk); y_hat = f @ W_dec +
    b_dec, in units where the input and target have mean squared norm d (train() takes them
    back)."""

    def __init__(self, d_in, d_sae, apply_b_dec, gen, b_dec):
        super().__init__()
        w = torch.randn(d_sae, d_in, generator=gen)
        w = w / w.norm(dim=1, keepdim=True)
        self.W_dec = torch.nn.Parameter(w.clone())
        self.W_enc = torch.nn.Parameter(w.t().clone())
        self.b_enc = torch.nn.Parameter(torch.zeros(d_sae))
        self.b_dec = torch.nn.Parameter(b_dec.clone())
        self.apply_b_dec = apply_b_dec
        self.k = 0

    def pre(self, x):
        return (x - self.b_dec if self.apply_b_dec else x) @ self.W_enc + self.b_enc

    def forward(self, x):
        pre = self.pre(x)
        if self.k:
            top = pre.topk(self.k, dim=-1)
            f = torch.zeros_like(pre).scatter(-1, top.indices, torch.relu(top.values))
        else:
            f = torch.relu(pre)
        return f, f @ self.W_dec + self.b_dec


def train(X, Y, args, seed, name, say, apply_b_dec):
    """A ReLU dictionary from X [N, d] to Y [N, d]; returns (W_enc [d, S], b_enc, W_dec [S, d],
    b_dec) in the data's own units. Three phases:
      1. TopK with k = --target-l0 on the squared error alone (half the steps): it learns good
         directions fast, at the L0 asked, with no penalty to tune;
      2. ReLU, each feature's bias lowered so that it fires as often as it did among the top k,
         then trained on the squared error alone (the other half), each bias steered so that its
         feature keeps firing at that rate (the weights learn to fit the ReLU's values; the rates,
         and so L0, stay the TopK's: an L1 penalty there left two thirds of the features dead);
      3. the decoder refitted by least squares to the codes phase 2 ends with (the encoder, and so
         L0, unchanged)."""
    N, d = X.shape
    gen = torch.Generator().manual_seed(seed)
    # Inputs and targets scaled to a mean squared norm of d, so that one learning rate fits
    # every block (the stream's norm grows with depth).
    sx = math.sqrt(d / X.pow(2).sum(-1).mean().item())
    sy = sx if apply_b_dec else math.sqrt(d / Y.pow(2).sum(-1).mean().item())
    y_mean = Y.mean(0) * sy
    var = (Y * sy - y_mean).pow(2).sum(-1).mean().item()
    m = Dictionary(d, args.d_sae, apply_b_dec, gen, y_mean)
    m.k = int(args.target_l0)
    opt = torch.optim.Adam(m.parameters(), lr=args.lr)
    fired = torch.zeros(args.d_sae)
    switch = args.steps // 2
    t0 = time.time()
    for step in range(args.steps):
        if step == switch:
            rate, pre_scale = to_relu(m, X, sx, gen)
            rate_now = rate.clone()
            m.b_enc.requires_grad_(False)
            opt = torch.optim.Adam([m.W_enc, m.W_dec, m.b_dec], lr=args.lr)
        start = 0 if step < switch else switch
        span = switch if step < switch else args.steps - switch
        lr = args.lr * min(1.0, (step - start + 1) / 50) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - start) / span)))
        for g in opt.param_groups:
            g["lr"] = lr
        idx = torch.randint(0, N, (args.batch,), generator=gen)
        x, y = X[idx] * sx, Y[idx] * sy
        f, y_hat = m(x)
        fvu = (y_hat - y).pow(2).sum(-1).mean() / var
        opt.zero_grad(set_to_none=True)
        fvu.backward()
        opt.step()
        l0 = (f > 0).float().sum(-1).mean().item()
        fired += (f > 0).sum(0).float()
        if step >= switch:
            with torch.no_grad():
                # Each bias toward its feature's TopK rate (rates averaged over ~10 steps).
                rate_now = 0.9 * rate_now + 0.1 * (f > 0).float().mean(0)
                m.b_enc += 0.1 * pre_scale * torch.log((rate + 1e-5) / (rate_now + 1e-5)).clamp(-1, 1)
        if step % 200 == 199 or step == args.steps - 1:
            dead = (fired == 0)
            if step < switch * 0.8 and dead.any():
                resample(m, X, Y, sx, sy, dead, gen, opt)
            if args.verbose or step == args.steps - 1:
                say(f"  {name} step {step + 1}: fvu {fvu.item():.4f} l0 {l0:.1f} "
                    f"silent {int(dead.sum())} ({time.time() - t0:.0f} s)")
            fired.zero_()
    refit_decoder(m, X, Y, sx, sy, gen, var, say, name)
    with torch.no_grad():
        # Back to the data's units: x' = x * sx, y = y' / sy.
        return (m.W_enc * sx).detach(), m.b_enc.detach().clone(), (m.W_dec / sy).detach(), (m.b_dec / sy).detach()


def to_relu(m, X, sx, gen, n=16384):
    """TopK to ReLU: each feature's bias lowered by the pre-activation it exceeds as often as it
    was among the top k on a sample (features never there: their largest).
    Returns those rates [S] and each feature's pre-activation spread (std) [S]."""
    with torch.no_grad():
        x = X[torch.randint(0, len(X), (n,), generator=gen)] * sx
        pre = m.pre(x)
        f, _ = m(x)
        count = (f > 0).sum(0)
        ranked = pre.sort(0, descending=True).values  # [n, S]
        theta = ranked[(count - 1).clamp(0, n - 1), torch.arange(pre.shape[1])]
        theta = torch.where(count > 0, theta, ranked[0]).clamp(min=0)
        m.b_enc -= theta * 0.999
        m.k = 0
        # A floor on the rates: a feature too rare to be seen in the sample still fires now and
        # then (else the steering would silence it for good), and one that fired on a few
        # training rows alone (of licence texts, say) still fires on other text (at 1e-4, 11 %
        # of block 3's features never fired on the held-out pages).
        return (count.float() / n).clamp(min=5e-4), pre.std(0)


def refit_decoder(m, X, Y, sx, sy, gen, var, say, name, n=131072):
    """W_dec (and a transcoder's b_dec) by least squares on the codes of a sample of rows (an
    SAE's b_dec stays: its encoder subtracts it)."""
    with torch.no_grad():
        idx = torch.randint(0, len(X), (n,), generator=gen)
        x, y = X[idx] * sx, Y[idx] * sy
        f = torch.relu(m.pre(x))
        before = ((f @ m.W_dec + m.b_dec - y).pow(2).sum(-1).mean() / var).item()
        if m.apply_b_dec:
            A, B = f, y - m.b_dec
        else:
            A, B = torch.cat([f, torch.ones(n, 1)], 1), y
        G = A.t() @ A
        G += 1e-4 * G.diagonal().mean() * torch.eye(G.shape[0])  # ridge: rare features stay finite
        W = torch.linalg.solve(G, A.t() @ B)
        if m.apply_b_dec:
            m.W_dec.copy_(W)
        else:
            m.W_dec.copy_(W[:-1])
            m.b_dec.copy_(W[-1])
        after = ((f @ m.W_dec + m.b_dec - y).pow(2).sum(-1).mean() / var).item()
        say(f"  {name}: decoder refitted, FVU on {n} training rows {before:.4f} -> {after:.4f}, "
            f"L0 {(f > 0).float().sum(-1).mean().item():.1f}")


def resample(m, X, Y, sx, sy, dead, gen, opt):
    """Dead features' encoders point at rows of a random sample the dictionary reconstructs worst,
    their decoders at those rows' errors (Anthropic's resampling, simplified); Adam's moments of
    their weights restart."""
    with torch.no_grad():
        idx = torch.randint(0, len(X), (8192,), generator=gen)
        x, y = X[idx] * sx, Y[idx] * sy
        _, y_hat = m(x)
        err = (y - y_hat).pow(2).sum(-1)
        worst = torch.multinomial(err, int(dead.sum()), replacement=False, generator=gen)
        which = torch.nonzero(dead).flatten()
        alive = ~dead
        enc_norm = m.W_enc[:, alive].norm(dim=0).mean() if alive.any() else 1.0
        xin = x[worst] - (m.b_dec if m.apply_b_dec else 0)
        m.W_enc[:, which] = (xin / xin.norm(dim=1, keepdim=True)).t() * enc_norm * 0.2
        e = (y - y_hat)[worst]
        m.W_dec[which] = e / e.norm(dim=1, keepdim=True)
        m.b_enc[which] = 0
        for prm, sl in ((m.W_enc, (slice(None), which)), (m.W_dec, which), (m.b_enc, which)):
            st = opt.state.get(prm)
            if st:
                st["exp_avg"][sl] = 0
                st["exp_avg_sq"][sl] = 0


# ---------------------------------------------------------------- files
def write_dirs(out, tcs, sae):
    tc_dir = os.path.join(out, "transcoders")
    for l, (W_enc, b_enc, W_dec, b_dec) in enumerate(tcs):
        d = os.path.join(tc_dir, f"gpt2-small-dun-chl-mlp-tc{l}")
        os.makedirs(d, exist_ok=True)
        tt.write_safetensors(os.path.join(d, "sae.safetensors"),
                             {"W_enc": W_enc, "b_enc": b_enc, "W_dec": W_dec, "b_dec": b_dec})
        with open(os.path.join(d, "sae.json"), "w") as f:
            json.dump({"d_in": W_enc.shape[0], "d_out": W_dec.shape[1], "d_sae": W_enc.shape[1],
                       "is_transcoder": True, "hook_name": f"blocks.{l}.hook_resid_mid",
                       "out_hook_name": f"blocks.{l}.hook_mlp_out", "architecture": "standard",
                       "apply_b_dec_to_input": False, "model_name": "gpt2-tiny",
                       "trained_by": "scripts/train_dictionaries.py"}, f, indent=2)
    sae_dir = os.path.join(out, "sae")
    os.makedirs(sae_dir, exist_ok=True)
    W_enc, b_enc, W_dec, b_dec = sae
    tt.write_safetensors(os.path.join(sae_dir, "sae_weights.safetensors"),
                         {"W_enc": W_enc, "b_enc": b_enc, "W_dec": W_dec, "b_dec": b_dec})
    with open(os.path.join(sae_dir, "cfg.json"), "w") as f:
        json.dump({"architecture": "standard", "d_in": W_enc.shape[0], "d_sae": W_enc.shape[1],
                   "dtype": "float32", "device": "cpu", "apply_b_dec_to_input": True,
                   "normalize_activations": "none", "model_name": "gpt2-tiny", "hook_name": SAE_HOOK,
                   "hook_layer": SAE_LAYER, "hook_head_index": None,
                   "context_size": WINDOW + 1, "prepend_bos": True,
                   "trained_by": "scripts/train_dictionaries.py"}, f, indent=2)
    return tc_dir, sae_dir


def convert(args, tc_dir, sae_dir):
    exe = os.path.join(ROOT, "build/native/gpt2-convert")
    tc_path, sae_path = os.path.join(args.out, TC_FILE), os.path.join(args.out, SAE_FILE)
    subprocess.run([exe, "--transcoders", tc_dir, "--output", tc_path, "--type", "f16"], check=True)
    subprocess.run([exe, "--sae", sae_dir, "--output", sae_path, "--type", "f16"], check=True)
    return tc_path, sae_path


def read_dictionaries(tc_path, sae_path, L):
    """The converted files read back: per block (W_enc [S, d] one row per feature, b_enc, W_dec
    [S, d], b_dec), and the SAE's."""
    _, t = tt.gguf_tensors(tc_path)
    tcs = [tuple(t[f"tc.{l}.{k}"] for k in ("W_enc", "b_enc", "W_dec", "b_dec")) for l in range(L)]
    _, s = tt.gguf_tensors(sae_path)
    return tcs, tuple(s[f"sae.{k}"] for k in ("W_enc", "b_enc", "W_dec", "b_dec"))


# ---------------------------------------------------------------- figures
def figures(p, cfg, rows, tcs, sae, loss_windows, batch=16):
    """Every figure of the module docstring over rows [n, 1 + WINDOW]: the dictionaries' over all
    of them, the losses over the first loss_windows (the unembedding is most of the cost), whose
    targets are each window's tokens after its first, predicted from positions 1..WINDOW-1."""
    L = cfg["n_layer"]
    stats = {k: [0.0] * (L + 1) for k in ("err", "sum_sq", "l0")}
    sums = [0.0] * (L + 1)
    fired = [torch.zeros(d[0].shape[0], dtype=torch.bool) for d in tcs + [sae]]
    loss = {"model": 0.0, "tc": 0.0, "tc_zero": 0.0, "sae": 0.0, "sae_zero": 0.0}

    def tc_apply(l, resid_mid):
        W_enc, b_enc, W_dec, b_dec = tcs[l]
        f = torch.relu(bare_ln(resid_mid) @ W_enc.t() + b_enc)
        return f, f @ W_dec + b_dec

    def sae_apply(x):
        W_enc, b_enc, W_dec, b_dec = sae
        f = torch.relu((centred(x) - b_dec) @ W_enc.t() + b_enc)
        return f, f @ W_dec + b_dec

    def account(k, f, y, y_hat):
        f, y, y_hat = f[:, 1:].reshape(-1, f.shape[-1]), y[:, 1:].reshape(-1, y.shape[-1]), y_hat[:, 1:].reshape(-1, y.shape[-1])
        stats["err"][k] += (y - y_hat).pow(2).sum().item()
        stats["sum_sq"][k] += y.pow(2).sum().item()
        sums[k] = sums[k] + y.sum(0)
        stats["l0"][k] += (f > 0).sum().item()
        fired[k] |= (f > 0).any(0)

    def nll(logits, ids):
        return F.cross_entropy(logits[:, 1:-1].reshape(-1, logits.shape[-1]), ids[:, 2:].reshape(-1),
                               reduction="sum").item()

    with torch.no_grad():
        for i in range(0, len(rows), batch):
            ids = rows[i:i + batch]
            mid = {}

            def observe(name, l, t):
                if name == "resid_mid":
                    mid[l] = t
                elif name == "mlp_out":
                    f, y_hat = tc_apply(l, mid[l])
                    account(l, f, t, y_hat)
                elif name == "resid_pre" and l == SAE_LAYER:
                    f, y_hat = sae_apply(t)
                    account(L, f, centred(t), y_hat)
                return t

            if i >= loss_windows:
                tt.forward(p, cfg, ids, hook=observe, logits=False)
                continue
            loss["model"] += nll(tt.forward(p, cfg, ids, hook=observe), ids)

            def keep_first(t, new):  # the <|endoftext|> row stays the model's
                return torch.cat([t[:, :1], new[:, 1:]], 1)

            def tc_splice(name, l, t):
                if name == "resid_mid":
                    mid[l] = t
                elif name == "mlp_out":
                    return keep_first(t, tc_apply(l, mid[l])[1])
                return t

            def tc_zero(name, l, t):
                return keep_first(t, torch.zeros_like(t)) if name == "mlp_out" else t

            def sae_splice(name, l, t):
                if name == "resid_pre" and l == SAE_LAYER:
                    return keep_first(t, sae_apply(t)[1] + t.mean(-1, keepdim=True))
                return t

            def sae_zero(name, l, t):
                if name == "resid_pre" and l == SAE_LAYER:
                    return keep_first(t, torch.zeros_like(t))
                return t

            for k, h in (("tc", tc_splice), ("tc_zero", tc_zero), ("sae", sae_splice), ("sae_zero", sae_zero)):
                loss[k] += nll(tt.forward(p, cfg, ids, hook=h), ids)
    n_pred = min(len(rows), loss_windows) * (WINDOW - 1)
    out = {"tokens": len(rows) * WINDOW, "predictions": n_pred, "windows": len(rows), "blocks": []}
    for k in range(L + 1):
        tokens = len(rows) * WINDOW
        mean = sums[k] / tokens
        var = stats["sum_sq"][k] - tokens * mean.pow(2).sum().item()
        out["blocks"].append({"fvu": stats["err"][k] / var, "l0": stats["l0"][k] / tokens,
                              "dead": 1 - fired[k].float().mean().item(), "d_sae": len(fired[k])})
    out["sae"] = out["blocks"].pop()
    for k in loss:
        loss[k] /= n_pred
    out["loss"] = loss
    out["tc_recovered"] = (loss["tc_zero"] - loss["tc"]) / (loss["tc_zero"] - loss["model"])
    out["sae_recovered"] = (loss["sae_zero"] - loss["sae"]) / (loss["sae_zero"] - loss["model"])
    return out


def report(fig, say, title):
    say(f"{title}: {fig['windows']} windows, {fig['tokens']} tokens")
    for l, b in enumerate(fig["blocks"]):
        say(f"  transcoder block {l}: FVU {b['fvu']:.4f}  L0 {b['l0']:.2f}  dead {b['dead']:.4f} "
            f"(of {b['d_sae']})")
    b = fig["sae"]
    say(f"  SAE {SAE_HOOK}: FVU {b['fvu']:.4f}  L0 {b['l0']:.2f}  dead {b['dead']:.4f} (of {b['d_sae']})")
    lo = fig["loss"]
    say(f"  loss (nats/token, {fig['predictions']} predictions): model {lo['model']:.4f}; every MLP replaced by its transcoder "
        f"{lo['tc']:.4f}, every MLP output zero {lo['tc_zero']:.4f}: recovered {fig['tc_recovered']:.4f}")
    say(f"  SAE spliced {lo['sae']:.4f}, stream zero {lo['sae_zero']:.4f}: recovered {fig['sae_recovered']:.4f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "weights/gpt2-tiny-q8_0.gguf"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build/dictionaries"))
    ap.add_argument("--train-tokens", type=int, default=300_000)
    ap.add_argument("--loss-windows", type=int, default=256,
                    help="held-out windows whose loss is measured (the dictionaries' figures: all)")
    ap.add_argument("--d-sae", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=1600)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--target-l0", type=float, default=20.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", help="train (again) only these dictionaries, comma-separated (tc0..tc3, "
                    "sae; 'cache': none, only the activations), and keep them in --out for a run "
                    "without --only, which trains the others")
    ap.add_argument("--eval-only", action="store_true")
    ap.add_argument("--check-engine", action="store_true",
                    help="only compare the activations with build/native/gpt2's")
    ap.add_argument("--verbose", action="store_true", help="log every 200 steps")
    args = ap.parse_args()

    torch.manual_seed(1234)
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "log.txt"), "a")

    def say(msg):
        print(msg, flush=True)
        log.write(msg + "\n")
        log.flush()

    t0 = time.time()
    p, cfg, bpe = load_model(args.model)
    L = cfg["n_layer"]
    say(f"{args.model}: {L} blocks, width {cfg['n_embd']}; {vars(args)}")
    if args.check_engine:
        check_engine(args.model, p, cfg, bpe, say)
        return
    with open(os.path.join(ROOT, "tests/data/tiny_heldout.txt"), encoding="utf-8") as f:
        test_rows = windows(bpe.encode(f.read()))[:TEST_WINDOWS]
    cache = os.path.join(args.out, "acts.pt")
    if os.path.exists(cache):
        tc_in, tc_out, sae_in, heldout_rows = torch.load(cache)
    else:
        train_docs, heldout_docs = tt.corpus()
        # A fixed sample of the training documents, in a seeded order, up to --train-tokens.
        order = torch.randperm(len(train_docs), generator=torch.Generator().manual_seed(7)).tolist()
        ids = []
        for i in order:
            ids.extend(bpe.encode(train_docs[i][1]) + [EOT])
            if len(ids) >= args.train_tokens:
                break
        train_rows = windows(ids)
        held = []
        for _, text in heldout_docs:
            held.extend(bpe.encode(text) + [EOT])
        heldout_rows = windows(held)
        say(f"data: {len(train_rows)} training windows ({len(train_rows) * WINDOW} tokens); "
            f"{len(heldout_docs)} held-out pages, {len(heldout_rows)} windows ({time.time() - t0:.0f} s)")
        tc_in, tc_out, sae_in = collect(p, cfg, train_rows)
        torch.save((tc_in, tc_out, sae_in, heldout_rows), cache)
        say(f"activations cached: {len(sae_in)} rows ({time.time() - t0:.0f} s)")

    tc_path, sae_path = os.path.join(args.out, TC_FILE), os.path.join(args.out, SAE_FILE)
    if not args.eval_only:
        names = [f"tc{l}" for l in range(L)] + ["sae"]
        only = args.only.split(",") if args.only else names
        trained = {}
        for i, name in enumerate(names):
            path = os.path.join(args.out, f"trained_{name}.pt")
            if name not in only:
                continue
            if os.path.exists(path) and not args.only:
                trained[name] = torch.load(path)
                continue
            t1 = time.time()
            if name == "sae":
                trained[name] = train(sae_in, sae_in, args, 200, "SAE", say, True)
            else:
                trained[name] = train(tc_in[i], tc_out[i], args, 100 + i, f"transcoder {i}", say, False)
            torch.save(trained[name], path)
            say(f"{name} trained in {time.time() - t1:.0f} s")
        if args.only:
            return
        tc_path, sae_path = convert(args, *write_dirs(args.out, [trained[f"tc{l}"] for l in range(L)], trained["sae"]))
    tcs, sae = read_dictionaries(tc_path, sae_path, L)
    for path in (tc_path, sae_path):
        say(f"{os.path.basename(path)}: {os.path.getsize(path)} bytes")
    rows = heldout_rows[torch.randperm(len(heldout_rows), generator=torch.Generator().manual_seed(9))]
    report(figures(p, cfg, rows, tcs, sae, args.loss_windows), say,
           "held-out pages (a seeded sample of their windows)")
    fig = figures(p, cfg, test_rows, tcs, sae, len(test_rows))
    report(fig, say, f"tests/data/tiny_heldout.txt, its first {TEST_WINDOWS} windows")
    with open(os.path.join(args.out, "test_figures.json"), "w") as f:
        json.dump(fig, f, indent=2)
    say(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
