#!/usr/bin/python3
"""Golden logits of GPT-2 medium, large and XL's head counts and widths, computed with PyTorch, for
tests/convert/convert_golden_test.cc.

Each shape is one block of a released size's width and heads (medium 1024/16, large 1280/20,
XL 1600/25; n_ff = 4 n_embd), with a 512-token vocabulary and 32 positions so the tests stay
fast; the weights are synthetic_model.h's formula for that config, and the forward pass is
make_golden.py's (torch ops, float32), run with its module constants set to the shape. The C++
test writes the same weights as a Hugging Face checkpoint, converts it and compares.

Needs Debian's python3-torch and python3-numpy (/usr/bin/python3). Not run in CI: its output,
tests/data/golden_family.bin (make_golden.py's file format), is committed. From the repository root:
    scripts/make_golden_family.py [--output tests/data/golden_family.bin]
Records, per shape S (medium, large, xl):
    S/config  i32 [6]  n_vocab, n_ctx, n_embd, n_head, n_layer, n_ff
    S/ids     i32 [T]
    S/logits  f32 [T, V]
    S/greedy  i32 [6]  greedy continuation (argmax, full recompute)
"""

import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_golden as mg  # noqa: E402

SHAPES = {"medium": (1024, 16), "large": (1280, 20), "xl": (1600, 25)}
N_VOCAB, N_CTX, N_LAYER = 512, 32, 1
IDS = [0, 511, 17, 256, 3, 99, 400, 17, 256, 3]
GREEDY_STEPS = 6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="tests/data/golden_family.bin")
    args = parser.parse_args()
    torch.set_num_threads(2)
    out = mg.GoldenWriter()
    for name, (n_embd, n_head) in SHAPES.items():
        # make_golden.py's functions read these module constants when called.
        mg.N_VOCAB, mg.N_CTX, mg.N_EMBD, mg.N_HEAD, mg.N_LAYER, mg.N_FF = (
            N_VOCAB, N_CTX, n_embd, n_head, N_LAYER, 4 * n_embd)
        w = {k: torch.from_numpy(v) for k, v in mg.build_weights().items()}
        with torch.no_grad():
            logits = mg.forward(w, IDS)
            ids = list(IDS)
            greedy = []
            for _ in range(GREEDY_STEPS):
                next_id = int(torch.argmax(mg.forward(w, ids)[-1]))
                greedy.append(next_id)
                ids.append(next_id)
        out.add(f"{name}/config", np.array([N_VOCAB, N_CTX, n_embd, n_head, N_LAYER, 4 * n_embd], np.int32))
        out.add(f"{name}/ids", np.array(IDS, np.int32))
        out.add(f"{name}/logits", logits.numpy().astype(np.float32))
        out.add(f"{name}/greedy", np.array(greedy, np.int32))
        print(f"{name}: greedy {greedy}", file=sys.stderr)
    out.write(args.output)
    print(f"wrote {args.output}: {len(out.records)} records", file=sys.stderr)


if __name__ == "__main__":
    main()
