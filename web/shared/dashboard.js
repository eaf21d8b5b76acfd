// Feature dashboards as files: ours (`gpt2 dashboard --json`, the worker's dashboards) and
// Neuronpedia's exports, which use the same keys (issue 50). One reader for both, imported by the
// page (opening a file) and the worker (a dashboard it computed goes out in the same shape), and
// one writer.
//
// A file is any of: {"metadata": {...}, "features": [feature, ...]} (ours); a JSON array of
// features; one feature; or JSON Lines, one feature per line (Neuronpedia's batch files); gzip of
// any of these is opened by the caller (bytes starting 1f 8b: see openDashboardBytes).
// A feature: {layer, index, frac_nonzero, maxActApprox, pos_str, pos_values, neg_str, neg_values,
// freq_hist_data_bar_heights, freq_hist_data_bar_values, activations: [window, ...]}; a window:
// {tokens, values, maxValue, maxValueTokenIndex, dataIndex, binMin, binMax, binContains}, a top
// window with binMin = binMax = -1, a band's window with its band's bounds. Neuronpedia writes
// layer as its source id ("6-res-jb") and index as a string, adds keys (modelId, explanations,
// ...), and may leave out binContains or dataIndex: its label is explanations[0].description.

// The reader's limits: a file a tab can hold and draw (Neuronpedia's batch of a block is tens of
// MB; a window longer than any model's context is not a window).
export const kMaxDashboardFeatures = 1 << 20;
export const kMaxWindowTokens = 1 << 16;

export class DashboardFileError extends Error {}

const fail = (where, what) => {
  throw new DashboardFileError(`${where}: ${what}`);
};
const isNumber = (v) => typeof v === 'number' && Number.isFinite(v);
// Neuronpedia writes NaN-free JSON but may write null for a missing number.
const numberOr = (v, fallback) => (isNumber(v) ? v : fallback);

function numbers(v, where, name) {
  if (!Array.isArray(v)) fail(where, `${name} is not a list`);
  return v.map((x, i) => {
    if (x === null) return NaN;
    if (!isNumber(x)) fail(where, `${name}[${i}] is not a number`);
    return x;
  });
}

function strings(v, where, name) {
  if (!Array.isArray(v)) fail(where, `${name} is not a list`);
  return v.map((x, i) => {
    if (typeof x !== 'string') fail(where, `${name}[${i}] is not text`);
    return x;
  });
}

// A block's number from ours (5) or Neuronpedia's source id ("5-res-jb", "5-transcoder"): its
// leading integer; the source id itself is kept.
function layerOf(v, where) {
  if (Number.isInteger(v) && v >= 0) return {layer: v, source: String(v)};
  if (typeof v === 'string') {
    const m = /^(\d+)(?:-|$)/.exec(v);
    if (m) return {layer: Number(m[1]), source: v};
  }
  return fail(where, `layer ${JSON.stringify(v)} is not a block number or a source id like "5-res-jb"`);
}

function indexOf(v, where) {
  const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v;
  if (!Number.isInteger(n) || n < 0) fail(where, `index ${JSON.stringify(v)} is not a feature number`);
  return n;
}

function windowOf(w, where) {
  if (w === null || typeof w !== 'object' || Array.isArray(w)) fail(where, 'is not an object');
  const tokens = strings(w.tokens, where, 'tokens');
  const values = numbers(w.values, where, 'values');
  if (tokens.length > kMaxWindowTokens) fail(where, `${tokens.length} tokens: more than ${kMaxWindowTokens}`);
  if (values.length !== tokens.length) fail(where, `${values.length} values for ${tokens.length} tokens`);
  let top = -1;
  values.forEach((v, i) => {
    if (v === v && (top < 0 || v > values[top])) top = i;
  });
  const maxValueTokenIndex = Number.isInteger(w.maxValueTokenIndex) ? w.maxValueTokenIndex : top;
  if (tokens.length && (maxValueTokenIndex < 0 || maxValueTokenIndex >= tokens.length)) {
    fail(where, `maxValueTokenIndex ${maxValueTokenIndex} is outside its ${tokens.length} tokens`);
  }
  return {
    tokens, values,
    maxValue: numberOr(w.maxValue, top < 0 ? 0 : values[top]),
    maxValueTokenIndex,
    dataIndex: Number.isInteger(w.dataIndex) ? w.dataIndex : -1,
    binMin: numberOr(w.binMin, -1),
    binMax: numberOr(w.binMax, -1),
    binContains: numberOr(w.binContains, -1),
  };
}

// One feature, checked and in our shape (extra keys dropped; label from Neuronpedia's explanations).
export function featureOf(f, where = 'feature') {
  if (f === null || typeof f !== 'object' || Array.isArray(f)) fail(where, 'is not an object');
  const {layer, source} = layerOf(f.layer, where);
  const index = indexOf(f.index, where);
  const at = `${where} (block ${layer}, #${index})`;
  const posStr = f.pos_str === undefined ? [] : strings(f.pos_str, at, 'pos_str');
  const posValues = f.pos_values === undefined ? [] : numbers(f.pos_values, at, 'pos_values');
  const negStr = f.neg_str === undefined ? [] : strings(f.neg_str, at, 'neg_str');
  const negValues = f.neg_values === undefined ? [] : numbers(f.neg_values, at, 'neg_values');
  if (posStr.length !== posValues.length) fail(at, `${posValues.length} pos_values for ${posStr.length} pos_str`);
  if (negStr.length !== negValues.length) fail(at, `${negValues.length} neg_values for ${negStr.length} neg_str`);
  const heights = f.freq_hist_data_bar_heights === undefined ? [] :
      numbers(f.freq_hist_data_bar_heights, at, 'freq_hist_data_bar_heights');
  const centres = f.freq_hist_data_bar_values === undefined ? [] :
      numbers(f.freq_hist_data_bar_values, at, 'freq_hist_data_bar_values');
  if (heights.length !== centres.length) fail(at, `${heights.length} histogram heights for ${centres.length} bins`);
  const activations = f.activations === undefined || f.activations === null ? [] : f.activations;
  if (!Array.isArray(activations)) fail(at, 'activations is not a list');
  const windows = activations.map((w, i) => windowOf(w, `${at}, activations[${i}]`));
  const label = Array.isArray(f.explanations) && typeof f.explanations[0]?.description === 'string' ?
      f.explanations[0].description : (typeof f.label === 'string' ? f.label : '');
  const maxActApprox = numberOr(f.maxActApprox, Math.max(0, ...windows.map((w) => w.maxValue)));
  return {
    layer, source, index, label,
    frac_nonzero: numberOr(f.frac_nonzero, NaN),
    maxActApprox,
    pos_str: posStr, pos_values: posValues, neg_str: negStr, neg_values: negValues,
    freq_hist_data_bar_heights: heights, freq_hist_data_bar_values: centres,
    activations: windows,
  };
}

const kMetadataKeys = ['model', 'dictionary', 'corpus', 'context', 'n_windows', 'n_tokens'];

// text -> {metadata (ours, or null), features: [feature]}; DashboardFileError saying where and why.
export function parseDashboardText(text) {
  if (typeof text !== 'string') throw new DashboardFileError('a dashboard file is text');
  const body = text.replace(/^\uFEFF/, '').trim();
  if (!body) throw new DashboardFileError('the file is empty');
  let items;
  let metadata = null;
  let whole;
  try {
    whole = JSON.parse(body);
  } catch (e) {
    whole = undefined;
  }
  if (whole === undefined) {
    // JSON Lines: every non-empty line one feature.
    items = [];
    body.split('\n').forEach((line, i) => {
      if (!line.trim()) return;
      try {
        items.push(JSON.parse(line));
      } catch (e) {
        throw new DashboardFileError(`line ${i + 1}: not JSON (${e.message})`);
      }
      if (items.length > kMaxDashboardFeatures) throw new DashboardFileError(`more than ${kMaxDashboardFeatures} features`);
    });
  } else if (Array.isArray(whole)) {
    items = whole;
  } else if (whole !== null && typeof whole === 'object' && Array.isArray(whole.features)) {
    items = whole.features;
    if (whole.metadata !== null && typeof whole.metadata === 'object') {
      metadata = Object.fromEntries(kMetadataKeys.filter((k) => k in whole.metadata).map((k) => [k, whole.metadata[k]]));
    }
  } else if (whole !== null && typeof whole === 'object' && 'index' in whole) {
    items = [whole];
  } else {
    throw new DashboardFileError('not a dashboard: expected {"metadata", "features"}, a list of features, one feature or JSON Lines');
  }
  if (items.length > kMaxDashboardFeatures) throw new DashboardFileError(`more than ${kMaxDashboardFeatures} features`);
  return {metadata, features: items.map((f, i) => featureOf(f, `feature ${i}`))};
}

// Bytes of a file (gzip or not) -> the same; gzip opened with the platform's DecompressionStream.
export async function openDashboardBytes(bytes) {
  let data = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  if (data.length >= 2 && data[0] === 0x1f && data[1] === 0x8b) {
    const stream = new Blob([data]).stream().pipeThrough(new DecompressionStream('gzip'));
    data = new Uint8Array(await new Response(stream).arrayBuffer());
  }
  return parseDashboardText(new TextDecoder('utf-8').decode(data));
}

// A feature's windows split as its dashboard shows them: the top windows (binMin -1), then each
// band's, lowest band first: {top: [window], bands: [{min, max, contains, windows}]}.
export function splitWindows(feature) {
  const top = [];
  const bands = new Map();
  for (const w of feature.activations) {
    if (w.binMin === -1 && w.binMax === -1) {
      top.push(w);
      continue;
    }
    const key = `${w.binMin}:${w.binMax}`;
    if (!bands.has(key)) bands.set(key, {min: w.binMin, max: w.binMax, contains: w.binContains, windows: []});
    bands.get(key).windows.push(w);
  }
  return {top, bands: [...bands.values()].sort((a, b) => a.min - b.min)};
}

// A file too large to read as one string (every block's is GBs), read in pieces and indexed
// instead: ours as the engine writes it (its metadata on the first line, then a feature a line)
// or JSON Lines. Each feature is checked as parseDashboardText checks it and kept as {layer,
// source, index, label, maxActApprox, at: [begin, end)}, the bytes of its object in the file, read
// again when shown (readIndexedFeature). Returns {metadata (ours, or null), features, ours}, or
// null for any other shape (the caller reads the text whole); DashboardFileError naming the line.
// onProgress(bytes read, size) after each piece.
export async function indexDashboardFile(blob, piece = 16 << 20, onProgress = () => {}) {
  const decoder = new TextDecoder('utf-8');
  const features = [];
  let metadata = null;
  let ended = false;
  let line = 0;
  // One line's bytes [begin, begin + bytes.length): false when the file is not line-structured.
  const take = (bytes, begin) => {
    ++line;
    let lo = 0, hi = bytes.length;
    const blank = (b) => b === 0x20 || b === 0x09 || b === 0x0d || b === 0x0a;
    while (lo < hi && blank(bytes[lo])) ++lo;
    while (hi > lo && (blank(bytes[hi - 1]) || bytes[hi - 1] === 0x2c)) --hi;  // ours ends features with ','
    if (lo === hi) return true;
    const text = decoder.decode(bytes.subarray(lo, hi));
    if (line === 1 && text.startsWith('{"metadata"') && text.endsWith('"features":[')) {
      metadata = metadataOfHead(text);
      return metadata !== undefined;
    }
    if (metadata && (text === ']}' || text === ']')) {
      ended = true;
      return true;
    }
    if (ended) fail(`line ${line}`, 'text after the end of the feature list');
    let item;
    try {
      item = JSON.parse(text);
    } catch (e) {
      if (line === 1) return false;
      fail(`line ${line}`, `not JSON (${e.message})`);
    }
    if (line === 1 && (item === null || typeof item !== 'object' || Array.isArray(item) || !('index' in item))) return false;
    const f = featureOf(item, `line ${line}`);
    if (features.length === kMaxDashboardFeatures) fail(`line ${line}`, `more than ${kMaxDashboardFeatures} features`);
    features.push({layer: f.layer, source: f.source, index: f.index, label: f.label, maxActApprox: f.maxActApprox,
                   at: [begin + lo, begin + hi]});
    return true;
  };
  let pending = [];  // the current line's bytes from earlier pieces
  let lineBegin = 0;
  for (let at = 0; at < blob.size; at += piece) {
    const bytes = new Uint8Array(await blob.slice(at, Math.min(blob.size, at + piece)).arrayBuffer());
    let from = 0;
    for (let nl = bytes.indexOf(0x0a); nl >= 0; nl = bytes.indexOf(0x0a, from)) {
      const part = bytes.subarray(from, nl);
      const whole = pending.length ? concat([...pending, part]) : part;
      pending = [];
      if (!take(whole, lineBegin)) return null;
      from = nl + 1;
      lineBegin = at + from;
    }
    if (from < bytes.length) pending.push(bytes.subarray(from));
    onProgress(Math.min(blob.size, at + piece), blob.size);
  }
  if (pending.length && !take(concat(pending), lineBegin)) return null;
  if (metadata && !ended) fail(`line ${line}`, 'the feature list does not end');
  return {metadata, features, ours: !!metadata};
}

// Our file's metadata from its head, the text up to its feature list's '[' (the engine's first
// line): an object (its known keys), null when it names none, undefined when it is not such a head.
export function metadataOfHead(head) {
  let m;
  try {
    m = JSON.parse(`${head}]}`).metadata;
  } catch {
    return undefined;
  }
  return m !== null && typeof m === 'object' ? Object.fromEntries(kMetadataKeys.filter((k) => k in m).map((k) => [k, m[k]])) : null;
}

function concat(parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

// One feature of an indexed file (indexDashboardFile's entry), read from its bytes.
export async function readIndexedFeature(blob, entry) {
  return featureOf(JSON.parse(await blob.slice(entry.at[0], entry.at[1]).text()),
                   `block ${entry.layer}, #${entry.index}`);
}

// {metadata, features} -> the file's text, our keys in our order (Neuronpedia's keys: the page's
// export opens in any tool that reads them).
export function dashboardText({metadata, features}) {
  return `{"metadata":${JSON.stringify(metadata ?? {})},"features":[${features.map(featureText).join(',')}]}`;
}

// One feature (shared/dashboard.js's shape) as the file writes it.
export function featureText(f) {
  const feature = (f) => ({
    layer: f.layer, index: f.index, frac_nonzero: f.frac_nonzero, maxActApprox: f.maxActApprox,
    pos_str: f.pos_str, pos_values: Array.from(f.pos_values), neg_str: f.neg_str,
    neg_values: Array.from(f.neg_values),
    freq_hist_data_bar_heights: Array.from(f.freq_hist_data_bar_heights),
    freq_hist_data_bar_values: Array.from(f.freq_hist_data_bar_values),
    activations: f.activations.map((w) => ({
      tokens: w.tokens, values: Array.from(w.values), maxValue: w.maxValue,
      maxValueTokenIndex: w.maxValueTokenIndex, dataIndex: w.dataIndex, binMin: w.binMin,
      binMax: w.binMax, binContains: w.binContains,
    })),
  });
  return JSON.stringify(feature(f));
}
