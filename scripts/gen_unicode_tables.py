#!/usr/bin/python3
"""Writes src/tokenizer/unicode_tables.inc: the character classes of GPT-2's pre-tokenizer.

GPT-2's pattern (openai/gpt-2 src/encoder.py, tiktoken's "gpt2" pat_str)
    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
needs three classes:
  \\p{L}  General_Category Lu Ll Lt Lm Lo      (from UnicodeData.txt)
  \\p{N}  General_Category Nd Nl No            (from UnicodeData.txt)
  \\s     the White_Space property              (from PropList.txt)
\\s is White_Space because that is what the engines behind the reference tokenizers use: Rust
`regex` (tiktoken) and Python `regex` (encoder.py) both define \\s as White_Space. JavaScript's
\\s (js-tiktoken) differs in two code points, U+0085 (not space in JS) and U+FEFF (space in JS);
see the header comment written into the .inc.

UnicodeData.txt lists big blocks (CJK, Hangul, Tangut, private use...) as two lines,
"<Name, First>" and "<Name, Last>"; every code point between them has the same category.

Usage: scripts/gen_unicode_tables.py [UNICODE_DIR] [OUTPUT]
  defaults: /usr/share/unicode (Debian package unicode-data) and
            src/tokenizer/unicode_tables.inc next to this script's repository.
Standard library only.
"""

import os
import re
import subprocess
import sys

LETTER_CATEGORIES = {"Lu", "Ll", "Lt", "Lm", "Lo"}
NUMBER_CATEGORIES = {"Nd", "Nl", "No"}


def read_categories(path):
    """Returns {codepoint: general_category} for every assigned code point."""
    categories = {}
    range_start = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split(";")
            if len(fields) < 3:
                continue
            cp = int(fields[0], 16)
            name, category = fields[1], fields[2]
            if name.endswith(", First>"):
                range_start = cp
                continue
            if name.endswith(", Last>"):
                if range_start is None:
                    raise SystemExit(f"{path}: '{name}' without a First line")
                for c in range(range_start, cp + 1):
                    categories[c] = category
                range_start = None
                continue
            categories[cp] = category
    return categories


def read_property(path, prop):
    """Returns the set of code points that have binary property `prop` in PropList.txt."""
    result = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            cps, name = [s.strip() for s in line.split(";")]
            if name != prop:
                continue
            if ".." in cps:
                lo, hi = [int(s, 16) for s in cps.split("..")]
            else:
                lo = hi = int(cps, 16)
            result.update(range(lo, hi + 1))
    return result


def to_ranges(codepoints):
    """Sorted, merged [first, last] ranges."""
    ranges = []
    for cp in sorted(codepoints):
        if ranges and ranges[-1][1] + 1 == cp:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    return ranges


def unicode_version(proplist_path):
    with open(proplist_path, encoding="utf-8") as f:
        first = f.readline()
    m = re.search(r"PropList-([0-9.]+)\.txt", first)
    return m.group(1) if m else "unknown"


def debian_package_version():
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "unicode-data"],
                             capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def format_table(name, ranges, comment):
    lines = [f"// {comment}: {len(ranges)} ranges, "
             f"{sum(hi - lo + 1 for lo, hi in ranges)} code points.",
             f"static const CodepointRange {name}[] = {{"]
    row = []
    for lo, hi in ranges:
        row.append(f"{{0x{lo:X}, 0x{hi:X}}},")
        if len(row) == 5:
            lines.append("    " + " ".join(row))
            row = []
    if row:
        lines.append("    " + " ".join(row))
    lines.append("};")
    return "\n".join(lines)


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    unicode_dir = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/unicode"
    output = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        repo, "src", "tokenizer", "unicode_tables.inc")

    unicode_data = os.path.join(unicode_dir, "UnicodeData.txt")
    proplist = os.path.join(unicode_dir, "PropList.txt")
    categories = read_categories(unicode_data)
    letters = [cp for cp, cat in categories.items() if cat in LETTER_CATEGORIES]
    numbers = [cp for cp, cat in categories.items() if cat in NUMBER_CATEGORIES]
    white_space = read_property(proplist, "White_Space")
    if not white_space:
        raise SystemExit(f"{proplist}: no White_Space entries")
    version = unicode_version(proplist)
    package = debian_package_version()
    source = f"Unicode {version} (UnicodeData.txt, PropList.txt"
    source += f"; Debian unicode-data {package})" if package else ")"

    header = f"""\
// GENERATED by scripts/gen_unicode_tables.py -- do not edit. Rerun the script instead.
// Source: {source}.
//
// Character classes of GPT-2's pre-tokenizer pattern (openai/gpt-2 encoder.py, tiktoken "gpt2"):
//   kLetterRanges      \\p{{L}} = General_Category Lu Ll Lt Lm Lo
//   kNumberRanges      \\p{{N}} = General_Category Nd Nl No
//   kWhiteSpaceRanges  \\s    = the White_Space property (PropList.txt)
// Each table is sorted by first code point; ranges are inclusive and do not overlap.
//
// Choices where the reference implementations disagree:
// - \\s: tiktoken (Rust `regex`) and encoder.py (Python `regex`) use White_Space, which holds
//   U+0085 and not U+FEFF. js-tiktoken runs the pattern through JavaScript's RegExp, whose \\s is
//   the reverse on these two (U+FEFF yes, U+0085 no). We follow White_Space, the definition the
//   model was trained with; tests/data/tokenizer_golden.json checks texts with U+0085/U+FEFF
//   against js-tiktoken's ranks run with \\s spelled out as White_Space, and all other texts
//   against stock js-tiktoken.
// - \\p{{L}}/\\p{{N}} come from Unicode {version}. A newer engine (Node 20's ICU) also counts letters
//   and digits assigned after {version}; texts using them can split differently. None of the
//   golden texts does.
//
// Expects `struct CodepointRange {{ uint32_t first, last; }};` to be declared before inclusion."""

    parts = [header,
             format_table("kLetterRanges", to_ranges(letters), "\\p{L}"),
             format_table("kNumberRanges", to_ranges(numbers), "\\p{N}"),
             format_table("kWhiteSpaceRanges", to_ranges(white_space), "\\s (White_Space)")]
    with open(output, "w", encoding="utf-8") as f:
        f.write("\n\n".join(parts) + "\n")
    print(f"wrote {output}: {len(letters)} letters, {len(numbers)} numbers, "
          f"{len(white_space)} white-space code points (Unicode {version})")


if __name__ == "__main__":
    main()
