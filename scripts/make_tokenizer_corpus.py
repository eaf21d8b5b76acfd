#!/usr/bin/python3
"""Writes tests/data/tokenizer_corpus.json: the texts the tokenizer is checked on.

The ids come from elsewhere (scripts/gen_tokenizer_golden.mjs runs js-tiktoken on these texts);
this script only chooses the texts. Each one aims at a rule of GPT-2's pre-tokenizer
  's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
or at the BPE (long runs, rare bytes). Some prose comes from Debian's licence texts in
/usr/share/common-licenses (present on every Debian system), copied into the JSON so the
corpus does not depend on them later. Standard library only.
"""

import json
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def licence_excerpt(name, start, length):
    path = os.path.join("/usr/share/common-licenses", name)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return text[start:start + length]


CPP = r'''// Computes y = W x + b.
#include <vector>
template <typename T>
std::vector<T> Affine(const std::vector<T>& w, const std::vector<T>& x, T b) {
  std::vector<T> y(x.size(), b);
  for (size_t i = 0; i < x.size(); ++i) {
    y[i] += w[i] * x[i];  // fused? no: -ffp-contract=off
  }
  return y;
}
int main(int argc, char** argv) { return argc > 1 ? 0 : -1; }
'''

PYTHON = '''import json


class Encoder:
    """GPT-2's encoder, roughly."""

    def __init__(self, encoder, bpe_merges, errors='replace'):
        self.encoder = encoder
        self.decoder = {v: k for k, v in self.encoder.items()}
        self.cache = {}

    def bpe(self, token):
        if token in self.cache:
            return self.cache[token]
        word = tuple(token)
        while True:
            if len(word) == 1:
                break
        return ' '.join(word)
\tif tabs_and_spaces:
\t    mixed = True
'''

JSON_TEXT = '''{
  "name": "gpt2-wasm",
  "version": "0.1.0",
  "dependencies": {"js-tiktoken": "^1.0.21", "gpt-3-encoder": "1.1.4"},
  "numbers": [0, -1, 3.25e-7, 1e+300, 12345678901234567890],
  "escaped": "line\\nbreak \\"quoted\\" \\u00e9",
  "empty": {}, "nothing": null, "yes": true
}'''

MARKDOWN = '''# Title

Some *emphasis*, **strong**, `code`, and a [link](https://example.com/path?q=1&r=2#frag).

- item one
- item two
  - nested item

> quoted text

| a | b |
|---|---|
| 1 | 2 |
'''

HTML = ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Test</title>'
        '</head>\n<body><p class="x">Hello&nbsp;world &amp; friends</p><br/></body></html>\n')

PROSE = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world! How are you doing today? I'm fine, thanks.",
    ("It was the best of times, it was the worst of times, it was the age of wisdom, it was "
     "the age of foolishness, it was the epoch of belief, it was the epoch of incredulity, it "
     "was the season of Light, it was the season of Darkness, it was the spring of hope, it was "
     "the winter of despair."),
    ("Language models are trained to predict the next token. GPT-2 small has 124M parameters, "
     "12 layers, 12 heads and a context of 1024 tokens; its vocabulary has 50,257 entries."),
    "Data visualization empowers users to",
    "Artificial Intelligence is transforming the",
    "Mr. O'Neil said: \"We'll see.\" Then he left -- quickly -- at 5:30 p.m. (EST).",
    "e.g., i.e., etc., vs. & so on... Ellipsis… em—dash en–dash “curly quotes” ‘single’ «guillemets»",
    "SHOUTING IN ALL CAPS IS STILL TEXT. CamelCaseWordsAndSnake_case_words and kebab-case-words.",
]

CONTRACTIONS = [
    "I'M", "I'm", "don't", "DON'T", "Don't", "we'll", "WE'LL", "'S", "'s", "it's", "IT'S",
    "they're", "THEY'RE", "I've", "I'VE", "you'd", "YOU'D", "'ll", "'re", "'ve", "'m", "'d",
    "'t", "''s", "'", "''", "'''", "’s", "don’t", "rock'n'roll", "'re'", "'d'd", "'sss",
    "'tis", "'Twas", "he's'nt", "x'y", " 's", "  'll", "\n're", "'s'", "O'Reilly's",
    "'l", "'v", "'r", "don 't", "can't've", "y'all'd've",
]

SCRIPTS = [
    "中文测试：你好，世界！今天天气很好。",
    "日本語のテキスト、ひらがなとカタカナと漢字。東京は日本の首都です。",
    "한국어 텍스트입니다. 안녕하세요, 세계!",
    "العربية: مرحبا بالعالم، كيف حالك؟",
    "हिन्दी: नमस्ते दुनिया, आप कैसे हैं?",
    "Русский текст: Привет, мир! Съешь же ещё этих мягких французских булок.",
    "Ελληνικά: Γειά σου Κόσμε! Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
    "עברית: שלום עולם",
    "ภาษาไทย: สวัสดีชาวโลก",
    "Tiếng Việt: Xin chào thế giới, tôi là người Việt Nam.",
    "Türkçe: İstanbul'da ılık bir gün. Ğğ Şş Öö Çç",
    "Deutsch: Größenwahn, Straße, Übermäßig, Äpfel.",
    "Français: naïve café, déjà vu, crème brûlée, où est l'hôtel ?",
    "Mixed: Hello世界123abcПривет٣٤٥ мир!",
    "ქართული ენა, Հայերեն, አማርኛ, ᏣᎳᎩ",
]

EMOJI = [
    "😀", "😀😃😄", "👍🏽", "👍🏿 great", "👨‍👩‍👧‍👦", "👩🏽‍💻 coding", "🏳️‍🌈", "🇫🇷🇯🇵🇺🇸",
    "1️⃣ 2️⃣", "❤️ love ♥", "I ❤️ NY", "🤖: beep boop 🎉🎉🎉", "emoji😀between😀words",
]

COMBINING = [
    "e\u0301", "cafe\u0301", "Z\u0351\u0352\u0353a\u0354\u0355l\u0356g\u0357o", "n\u0303",
    "a\u0308\u0304", "\u0301\u0301\u0301 leading marks", "क्षत्रिय", "\u0e01\u0e34\u0e4a",
]

NUMBERS = [
    "0", "1", "12", "123", "1234", "12345", "1234567890",
    "3.14159265358979323846", "1,000,000", "1_000_000", "0x1F3A", "-42", "+7", "1e-10",
    "2024-01-31T12:34:56Z", "192.168.0.1", "$5.99", "€100", "¥1000", "50%",
    "98765432109876543210987654321098765432109876543210",
    "٠١٢٣٤٥٦٧٨٩", "１２３４５", "²³¹", "½ ¼ ¾", "Ⅻ ⅻ", "①②③", "𝟏𝟐𝟑", "abc123def456",
    "phone: +1 (555) 123-4567", "v1.2.3-rc.4",
]

SPACES = [
    "", " ", "  ", "   ", "\t", "\n", "\r\n", "\n\n\n", "a b", "a  b", "a   b", "a    b",
    "a          b", "  leading", "   leading three", "trailing ", "trailing   ", "\ttab",
    "\t\tindented", "a\tb", "a \tb", "a\t b", "a \n b", " \t \n ", "line1\nline2\n",
    "line1\r\nline2\r\n", "para\n\npara", "x \n\n y", "end with newline\n", "   \n",
    "word  \n  word", "\n word", "\n\nword", " \nword", "! !", "!  !", "a \u00a0b",
    "a\u00a0b", "\u00a0\u00a0x", "a\u2003b", "a \u2003 b", "a\u3000b", "\u3000\u3000全角",
    "a\u2028b", "a\u2029b", "a\u200bb", "a\u202fb", "\u000b\u000c", "a\u000bb",
    "x" + " " * 50 + "y", " " * 100, "\n" * 40, "\t \t \t \t",
]

# U+0085 (NEL) and U+FEFF (BOM): the code points where JavaScript's \s differs from Unicode
# White_Space (see src/tokenizer/unicode_tables.inc).
WHITE_SPACE_EDGES = [
    "a\u0085b", "a \u0085b", "\u0085\u0085 y", "line\u0085", "\ufeffHello", "x \ufeff{",
    "\ufeff\ufeff", "a \ufeff b", "{\ufeff}", "\u0085", "\ufeff",
]

SINGLES = [
    "a", "Z", "!", "'", "\"", "é", "中", "ß", "\u0000", "\u0001", "\u007f", "\u0080",
    "\u00ad", "\uffff", "\U0010ffff", "\U0001f600", "<", "|", "~", "\\", "@", "#",
]

SPECIAL = [
    "<|endoftext|>", "<|endoftext|>Hello<|endoftext|>", "text <|endoftext|> more text",
    "<|endoftext|><|endoftext|>", "<|endoftext", "endoftext|>", "<|im_start|>user",
]

REPEATS = [
    "a" * 200, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa b", "!" * 64, "=" * 120,
    "-" * 80, "." * 37, "ab" * 150, "hello" * 40, "ha " * 30, "\u00e9" * 50, "中" * 64,
    "😀" * 30, "0" * 99, "1234567890" * 12, "_" * 33, "*" * 48, "#" * 20 + " heading",
    "supercalifragilisticexpialidocious" * 5, "xX" * 70 + "\n",
    "Pneumonoultramicroscopicsilicovolcanoconiosis",
]

MISC = [
    "https://github.com/openai/gpt-2/blob/master/src/encoder.py",
    "user.name+tag@example.co.uk",
    "C:\\Users\\Name\\Documents\\file.txt",
    "/usr/local/bin/python3 -m pip install --upgrade pip",
    "SELECT * FROM users WHERE id = 42 AND name LIKE '%o''brien%';",
    "∑_{i=1}^{n} x_i² ≈ ∫₀^∞ e^{-x} dx = 1 → ∀x ∃y: x ≠ y ⇒ ¬(x = y)",
    "if (a <= b && c != d || !e) { return a->b[c] << 2; }",
    "#!/bin/sh\nset -eu\nfor f in *.txt; do echo \"$f\"; done\n",
    "\u00ab\u00bb\u2039\u203a\u201e\u201c\u201d\u2018\u2019",
    "\u2022 bullet \u00b7 middle dot \u00a7 section \u00b6 pilcrow \u2020 dagger",
    "ＦＵＬＬＷＩＤＴＨ ｔｅｘｔ！",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙 𝓼𝓬𝓻𝓲𝓹𝓽",
    "\ue000\uf8ff private use",
    "tab\tseparated\tvalues\n1\t2\t3\n",
    "CSV,\"quoted, field\",3.5\n",
]


def main():
    corpus = []
    corpus += PROSE
    corpus.append(licence_excerpt("GPL-3", 0, 3000))
    corpus.append(licence_excerpt("Apache-2.0", 0, 2500))
    corpus.append(licence_excerpt("BSD", 0, 1499))
    corpus.append(licence_excerpt("Artistic", 0, 2000))
    corpus += [CPP, PYTHON, JSON_TEXT, MARKDOWN, HTML]
    corpus += CONTRACTIONS + SCRIPTS + EMOJI + COMBINING + NUMBERS + SPACES
    corpus += WHITE_SPACE_EDGES + SINGLES + SPECIAL + REPEATS + MISC
    seen = set()
    unique = []
    for text in corpus:
        if text not in seen:
            seen.add(text)
            unique.append(text)
    path = os.path.join(REPO, "tests", "data", "tokenizer_corpus.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(unique, f, ensure_ascii=False, indent=0)
        f.write("\n")
    print(f"wrote {path}: {len(unique)} texts, "
          f"{sum(len(t.encode('utf-8')) for t in unique)} bytes of UTF-8")


if __name__ == "__main__":
    main()
