"""GPT-2's byte <-> character table (openai/gpt-2 src/encoder.py bytes_to_unicode): every byte
gets a printable character, so byte-level BPE tokens can be written as JSON strings. Shared by
the Python scripts that write vocabularies or token strings (scripts/train_tiny.py,
fuzz/make_seeds.py)."""


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))
