#!/usr/bin/env node
// Writes tests/data/tokenizer_golden.json: GPT-2 token ids of every text in
// tests/data/tokenizer_corpus.json, computed by js-tiktoken (getEncoding("gpt2"), ranks bundled in
// the npm package, no network), plus a digest of the ids of a ~300 KB text built from the corpus.
//
//   node scripts/gen_tokenizer_golden.mjs
//
// Texts are encoded as plain text: encode(text, [], []) allows no special token and disallows none,
// so "<|endoftext|>" in a text is ordinary characters, as Tokenizer::Encode treats it.
//
// One deliberate difference from stock js-tiktoken. It runs GPT-2's pattern through JavaScript's
// RegExp, whose \s counts U+FEFF and not U+0085; tiktoken (Rust `regex`) and OpenAI's encoder.py
// (Python `regex`) use Unicode White_Space, the reverse on these two code points, and so does our
// tokenizer (src/tokenizer/unicode_tables.inc). The expected ids therefore come from js-tiktoken's
// gpt2 ranks with the pattern's \s spelled out as White_Space; where that differs from stock
// js-tiktoken the case also records the stock ids ("js_stock_ids"), and the script checks that only
// texts holding U+0085/U+FEFF differ.
//
// The script also compares the committed Unicode tables with this Node's \p{L}, \p{N} and \s and
// fails if they disagree on any code point a corpus text uses.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { getEncoding, Tiktoken } from "js-tiktoken";
import gpt2Ranks from "js-tiktoken/ranks/gpt2";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const tiktokenVersion = JSON.parse(
  fs.readFileSync(path.join(repo, "node_modules/js-tiktoken/package.json"), "utf8"),
).version;

// Unicode White_Space (PropList.txt), for use inside a character class.
const kWhiteSpace = "\\t-\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const kStockPattern =
  "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const kWhiteSpacePattern =
  `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^${kWhiteSpace}\\p{L}\\p{N}]+` +
  `|[${kWhiteSpace}]+(?![^${kWhiteSpace}])|[${kWhiteSpace}]+`;

if (gpt2Ranks.pat_str !== kStockPattern) {
  throw new Error(`js-tiktoken's gpt2 pattern changed: ${gpt2Ranks.pat_str}`);
}
const stock = getEncoding("gpt2");
const whiteSpace = new Tiktoken({ ...gpt2Ranks, pat_str: kWhiteSpacePattern });
const encodeStock = (text) => stock.encode(text, [], []);
const encodeExpected = (text) => whiteSpace.encode(text, [], []);

// --- Unicode tables vs this Node's RegExp ----------------------------------------------------
function readTable(inc, name) {
  const m = inc.match(new RegExp(name + "\\[\\] = \\{([^;]*)\\};"));
  if (!m) throw new Error(`no ${name} in unicode_tables.inc`);
  return [...m[1].matchAll(/\{0x([0-9A-F]+), 0x([0-9A-F]+)\}/g)].map((x) => [
    parseInt(x[1], 16),
    parseInt(x[2], 16),
  ]);
}
function toSet(ranges) {
  const s = new Set();
  for (const [a, b] of ranges) for (let c = a; c <= b; ++c) s.add(c);
  return s;
}
const inc = fs.readFileSync(path.join(repo, "src/tokenizer/unicode_tables.inc"), "utf8");
const ours = {
  L: toSet(readTable(inc, "kLetterRanges")),
  N: toSet(readTable(inc, "kNumberRanges")),
  S: toSet(readTable(inc, "kWhiteSpaceRanges")),
};
const js = { L: /\p{L}/u, N: /\p{N}/u, S: /\s/u };
const differing = new Set();
const report = { L: [0, 0], N: [0, 0], S: [] };  // [js only, ours only]
for (let c = 0; c <= 0x10ffff; ++c) {
  if (c >= 0xd800 && c <= 0xdfff) continue;
  const ch = String.fromCodePoint(c);
  for (const k of ["L", "N", "S"]) {
    const j = js[k].test(ch);
    const o = ours[k].has(c);
    if (j === o) continue;
    differing.add(c);
    if (k === "S") report.S.push(c.toString(16));
    else report[k][j ? 0 : 1]++;
  }
}
console.log(
  `Node ${process.version} (Unicode ${process.versions.unicode}) vs unicode_tables.inc: ` +
    `\\p{L} ${report.L[0]} only in JS, ${report.L[1]} only ours; ` +
    `\\p{N} ${report.N[0]} only in JS, ${report.N[1]} only ours; \\s differs at U+${report.S.join(", U+")}`,
);

// --- Corpus ------------------------------------------------------------------------------------
const corpus = JSON.parse(fs.readFileSync(path.join(repo, "tests/data/tokenizer_corpus.json"), "utf8"));
const kEdgeSpaces = new Set([0x85, 0xfeff]);
const cases = [];
let stockDiffers = 0;
for (const text of corpus) {
  for (const ch of text) {
    const c = ch.codePointAt(0);
    if (differing.has(c) && !kEdgeSpaces.has(c)) {
      throw new Error(`corpus text ${JSON.stringify(text)} uses U+${c.toString(16)}, classified ` +
        "differently by this Node and unicode_tables.inc; its ids would not be a fair reference");
    }
  }
  const ids = encodeExpected(text);
  const stockIds = encodeStock(text);
  const entry = { text, ids };
  if (JSON.stringify(ids) !== JSON.stringify(stockIds)) {
    if (![...text].some((ch) => kEdgeSpaces.has(ch.codePointAt(0)))) {
      throw new Error(`White_Space pattern changed the ids of ${JSON.stringify(text)}`);
    }
    entry.js_stock_ids = stockIds;
    ++stockDiffers;
  }
  // Round trip on bytes (js-tiktoken's decode() goes through a TextDecoder, which drops a BOM).
  const bytes = Buffer.concat(ids.map((id) => Buffer.from(stock.textMap.get(id))));
  if (!bytes.equals(Buffer.from(text, "utf8"))) {
    throw new Error(`js-tiktoken does not round-trip ${JSON.stringify(text)}`);
  }
  cases.push(entry);
}

// --- Big text: the corpus repeated with varying separators, checked by digest -----------------
const kRepeats = 18;
const kSeparators = [" ", "\n", "", "\t", "  ", "\r\n", ". "];
const kChunk = 4096;
let big = "";
for (let rep = 0; rep < kRepeats; ++rep) {
  corpus.forEach((text, i) => {
    big += text + kSeparators[(i + rep) % kSeparators.length];
  });
}
const bigIds = encodeExpected(big);
// FNV-1a (32-bit) over each id's 4 little-endian bytes, one digest per chunk of kChunk ids.
function fnv1a32(ids) {
  let h = 0x811c9dc5;
  for (const id of ids) {
    for (let k = 0; k < 4; ++k) {
      h ^= (id >>> (8 * k)) & 0xff;
      h = Math.imul(h, 0x01000193) >>> 0;
    }
  }
  return h >>> 0;
}
const chunkDigests = [];
for (let i = 0; i < bigIds.length; i += kChunk) chunkDigests.push(fnv1a32(bigIds.slice(i, i + kChunk)));
const bigBytes = Buffer.byteLength(big, "utf8");

const golden = {
  format: "gpt2-tokenizer-golden",
  version: 1,
  generator: "scripts/gen_tokenizer_golden.mjs",
  reference: `js-tiktoken ${tiktokenVersion} gpt2 ranks, encode(text, [], []), pattern with \\s = ` +
    `Unicode White_Space; Node ${process.version}, Unicode ${process.versions.unicode}`,
  cases,
  big: {
    recipe: "for rep in 0..repeats-1, for each corpus text i: text + separators[(i + rep) % len]",
    repeats: kRepeats,
    separators: kSeparators,
    utf8_bytes: bigBytes,
    num_ids: bigIds.length,
    chunk: kChunk,
    chunk_fnv1a32: chunkDigests,
  },
};
const out = path.join(repo, "tests/data/tokenizer_golden.json");
fs.writeFileSync(out, JSON.stringify(golden) + "\n");
console.log(
  `wrote ${out}: ${cases.length} texts (${stockDiffers} differ from stock js-tiktoken by U+0085/U+FEFF), ` +
    `big text ${bigBytes} bytes -> ${bigIds.length} ids in ${chunkDigests.length} chunks`,
);
