// Sparse autoencoders for the page and its worker alike: where the Hugging Face SAEs live, what
// loading one costs in memory, the labels file, and steering/clamping as share-link text.

import {kWasmMaxBytes} from './hf.js';

// jbloom's residual-stream SAEs for GPT-2 small (SAELens's "Reformatted" release): one per
// block, on blocks.L.hook_resid_pre, 24,576 features of width 768.
export const kHfSaeRepo = 'jbloom/GPT2-Small-SAEs-Reformatted';
export const kHfSaeBlocks = 12;
export const kHfSaeShape = {dIn: 768, dSae: 24576};
export const kSaeFiles = ['cfg.json', 'sae_weights.safetensors'];

// BASE/jbloom/GPT2-Small-SAEs-Reformatted/resolve/main/blocks.L.hook_resid_pre/<file>.
export function hfSaeUrl(base, layer, file) {
  return `${base.replace(/\/+$/, '')}/${kHfSaeRepo}/resolve/main/blocks.${layer}.hook_resid_pre/${file}`;
}

// An SAE folder given by URL: its two files, SAELens's names.
export function saeFolderUrls(folder, baseUrl) {
  const dir = new URL(folder.replace(/\/*$/, '/'), baseUrl).href;
  return {cfg: new URL(kSaeFiles[0], dir).href, weights: new URL(kSaeFiles[1], dir).href};
}

// The Cache API key of the GGUF converted from a weights URL: a name only, never fetched.
export function saeCacheKey(weightsUrl) {
  return `${weightsUrl.replace(/[?#].*$/, '')}.q8_0.gguf`;
}

const mb = (bytes) => `${Math.round(bytes / 1e6)} MB`;

// Bytes while converting an SAE of d_in x d_sae (its f32 checkpoint held whole, beside its
// output, as the converter's beginCheckpoint/appendChunk takes it) and once loaded (the GGUF the
// engine keeps a copy of): gpt2-convert --sae's Q8_0 quantizes W_enc only; W_dec, the biases
// (and a JumpReLU threshold) stay f32.
export function saeBytes(dIn, dSae) {
  const matrix = dIn * dSae, vectors = 2 * dSae + dIn;
  const loaded = Math.ceil(matrix * 34 / 32 + (matrix + vectors) * 4);
  const checkpoint = (2 * matrix + vectors) * 4;
  return {checkpoint, loaded, peak: checkpoint + loaded};
}

// Whether one more SAE fits beside the model and the SAEs loaded: '' when it does, else a clear
// refusal. modelBytes: the model's memory (1.1 x its file, as hf.js reckons it); loadedBytes: the
// SAEs' already held; needBytes: saeBytes(...).peak of the new one (or .loaded for a .gguf).
// deviceMemory: navigator.deviceMemory (GB) when the page knows it. what/held name them in the
// refusal (the graph panel's transcoders take the same check).
export function saeRefusal({modelBytes, loadedBytes, needBytes, count, deviceMemory, what = 'SAE', held = 'SAE'}) {
  const total = modelBytes + loadedBytes + needBytes;
  const beside = count ? ` and the ${count} ${held}${count > 1 ? 's' : ''} loaded (${mb(loadedBytes)})` : '';
  const drop = `Drop ${what === 'SAE' ? 'an SAE' : `the ${held}s`} first.`;
  if (total > kWasmMaxBytes) {
    return `This ${what} needs about ${mb(needBytes)} while it loads; beside the model (${mb(modelBytes)})${beside} that is ` +
           `more than a web page's engine can use (${mb(kWasmMaxBytes)}). ${drop}`;
  }
  if (deviceMemory && total > 0.75 * deviceMemory * 2 ** 30) {
    return `This ${what} needs about ${mb(needBytes)} while it loads; beside the model (${mb(modelBytes)})${beside} that is ` +
           `more than this device (about ${deviceMemory} GB) can hold beside the browser. ${drop}`;
  }
  return '';
}

// d_in and d_sae from an SAELens cfg.json's text (for the memory check only: the converter is
// the one that reads and checks the configuration), or null.
export function cfgShape(text) {
  try {
    const cfg = JSON.parse(text);
    const dIn = Number(cfg.d_in), dSae = Number(cfg.d_sae);
    return Number.isInteger(dIn) && dIn > 0 && Number.isInteger(dSae) && dSae > 0 ? {dIn, dSae} : null;
  } catch {
    return null;
  }
}

// A labels file's text from its bytes: Neuronpedia publishes its exports gzipped (.jsonl.gz),
// so gzip's magic number means decompress first (DecompressionStream, in browsers and Node).
export async function labelsText(bytes) {
  const b = new Uint8Array(bytes);
  if (b[0] !== 0x1f || b[1] !== 0x8b) return new TextDecoder('utf-8').decode(b);
  return new Response(new Blob([b]).stream().pipeThrough(new DecompressionStream('gzip'))).text();
}

// Neuronpedia's explanations export: JSON lines (or one JSON array) of objects with `index` (a
// feature, a number or a string of digits) and `description`. -> Map feature -> description;
// the first description of a feature is kept. A file with no such line is an error.
export function parseLabels(text) {
  const trimmed = text.trim();
  let rows;
  if (trimmed.startsWith('[')) {
    try { rows = JSON.parse(trimmed); } catch (e) { throw new Error(`The labels file is not valid JSON (${e.message}).`); }
  } else {
    rows = [];
    trimmed.split('\n').forEach((line, i) => {
      if (!line.trim()) return;
      try { rows.push(JSON.parse(line)); } catch {
        throw new Error(`Line ${i + 1} of the labels file is not JSON: expected Neuronpedia's export, one ` +
                        '{"index": …, "description": …} per line.');
      }
    });
  }
  const labels = new Map();
  for (const r of Array.isArray(rows) ? rows : []) {
    const index = typeof r?.index === 'string' && /^\d+$/.test(r.index) ? Number(r.index) : r?.index;
    if (!Number.isInteger(index) || index < 0 || typeof r.description !== 'string') continue;
    if (!labels.has(index)) labels.set(index, r.description.trim());
  }
  if (!labels.size) {
    throw new Error('The labels file has no feature labels: expected Neuronpedia\'s export, objects with "index" ' +
                    'and "description".');
  }
  return labels;
}

// An SAE's source as a share link names it: 'hf:L' (jbloom's block L from the page's Hugging
// Face) or the URL of a folder with cfg.json and sae_weights.safetensors. Local files have none.
export function saeSourceText(source) {
  if (source.kind === 'hf') return `hf:${source.layer}`;
  if (source.kind === 'url') return source.folder;
  if (source.kind === 'gguf') return source.url;
  return '';
}

export function parseSaeSource(text) {
  const hf = /^hf:(\d+)$/.exec(text);
  if (hf) {
    const layer = Number(hf[1]);
    if (layer >= kHfSaeBlocks) throw new Error(`GPT-2 small has SAEs for blocks 0..${kHfSaeBlocks - 1}`);
    return {kind: 'hf', layer};
  }
  if (/^(https?:|\.|\/|[\w-])/.test(text) && !/\s/.test(text)) {
    // A .gguf (gpt2-convert --sae) as it is; anything else a folder of SAELens's files.
    return /\.gguf([?#].*)?$/i.test(text) ? {kind: 'gguf', url: text} : {kind: 'url', folder: text};
  }
  throw new Error('expected hf:BLOCK, the URL of an SAE .gguf, or of a folder with cfg.json and sae_weights.safetensors');
}

// Steering and clamping as link text: 'S.F:X,S.F:X' with S the SAE's place among the link's
// `sae` parameters, F the feature and X the strength (steer) or the value (clamp).
export function encodeSaeEdits(entries) {
  return entries.map(([s, f, x]) => `${s}.${f}:${x}`).join(',');
}

export function decodeSaeEdits(text) {
  const items = text.split(',');
  const out = [];
  for (const item of items) {
    const m = /^(\d+)\.(\d+):(-?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?)$/i.exec(item);
    if (!m || !Number.isFinite(Number(m[3]))) throw new Error('expected SAE.FEATURE:NUMBER items such as 0.12:4,0.7:-2');
    out.push([Number(m[1]), Number(m[2]), Number(m[3])]);
  }
  return out;
}

// The interventions' `sae` list from the page's edits [{id, feature, mode: 'steer'|'clamp',
// value}]: one entry per SAE, as the engine takes it (sae-contract.md).
export function saeInterventions(edits) {
  const bySae = new Map();
  for (const {id, feature, mode, value} of edits) {
    if (!bySae.has(id)) bySae.set(id, {id, steer: [], clamp: []});
    bySae.get(id)[mode].push([feature, value]);
  }
  return [...bySae.values()];
}
