#!/usr/bin/python3
"""Writes weights/gpt2-tiny-heldout.txt: the small model's held-out text as a dashboards corpus.

The pages of the Python 3.11 documentation that scripts/train_tiny.py holds out (every 20th, its
corpus()), which neither the small model nor its dictionaries (scripts/train_dictionaries.py)
trained on, as text (train_tiny.py's page_text), in its order, each document ended by a line
holding only <|endoftext|> (lab/corpus.h's .txt format). The page's dashboards panel reads it by
default; the PSF licence allows its redistribution. Needs python3.11-doc and python3-regex:

  /usr/bin/python3 scripts/make_heldout_corpus.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_tiny  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    _, heldout = train_tiny.corpus()
    out = os.path.join(ROOT, "weights", "gpt2-tiny-heldout.txt")
    with open(out, "w", encoding="utf-8") as f:
        for name, text in heldout:
            f.write(text.rstrip("\n") + "\n<|endoftext|>\n")
    print(f"{out}: {len(heldout)} pages, {os.path.getsize(out)} bytes")


if __name__ == "__main__":
    main()
