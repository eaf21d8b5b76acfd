// Where "Get GPT-2 from Hugging Face" reads from and what it keeps, for the page and its worker
// alike. `base` is https://huggingface.co or the page's ?hf=BASE.

export const kHfWeights = ['q8_0', 'q4_0', 'f16'];

// OpenAI's four sizes (src/model/config.h kReleasedGpt2), their Hub repositories and what a
// conversion needs: params counts every weight; matrices are the ones quantized (the others,
// norms and biases, stay F32).
export const kHfModels = [
  {id: 'gpt2', label: 'GPT-2 small (124M)', nLayer: 12, nEmbd: 768, nHead: 12},
  {id: 'gpt2-medium', label: 'GPT-2 medium (355M)', nLayer: 24, nEmbd: 1024, nHead: 16},
  {id: 'gpt2-large', label: 'GPT-2 large (774M)', nLayer: 36, nEmbd: 1280, nHead: 20},
  {id: 'gpt2-xl', label: 'GPT-2 XL (1.5B)', nLayer: 48, nEmbd: 1600, nHead: 25},
];

export function hfModel(id) {
  const model = kHfModels.find((m) => m.id === id);
  if (!model) throw new Error(`Unknown GPT-2 size "${id}" (${kHfModels.map((m) => m.id).join(', ')}).`);
  return model;
}

// Bytes of the converted GGUF (within a few kB: the header and its vocabulary are ~1.4 MB) and
// of the Hub's F32 checkpoint, for the page to say what a choice needs before any download.
export function hfSizes(id, weights) {
  const {nLayer: L, nEmbd: C} = hfModel(id);
  const V = 50257, T = 1024;
  const matrices = V * C + L * 12 * C * C;       // wte (tied output) and each block's four
  const vectors = T * C + L * 13 * C + 2 * C;    // wpe, biases and norms: F32
  const perWeight = {q8_0: 34 / 32, q4_0: 18 / 32, f16: 2}[weights];
  return {gguf: Math.ceil(matrices * perWeight + vectors * 4 + 1.5e6), checkpoint: (matrices + vectors) * 4};
}

// The most memory the engine's WebAssembly module may use (src/base/memory_limit.h kWasmMemoryBudget:
// -sMAXIMUM_MEMORY=4GB less 64 kB).
export const kWasmMaxBytes = 4 * 2 ** 30 - 2 ** 16;

const gb = (bytes) => (bytes >= 1e9 ? `${(bytes / 1e9).toFixed(1)} GB` : `${Math.round(bytes / 1e6)} MB`);

// What getting `id` as `weights` takes, in words, and whether this device can hold it:
// {text, refusal ('' when it fits), memory, disk}. The memory is the bound the engine keeps after
// loading: 1.1 x the file plus the KV cache at full context (8-bit for quantized weights, f16 for
// F16). deviceMemory: navigator.deviceMemory (GB, rounded down by the browser) or undefined;
// storageFree: bytes the browser would still let this origin store, or undefined.
export function hfChoice(id, weights, {deviceMemory, storageFree} = {}) {
  const model = hfModel(id);
  const {gguf, checkpoint} = hfSizes(id, weights);
  const kv = 2 * model.nLayer * 1024 * model.nEmbd * (weights === 'f16' ? 2 : 34 / 32);
  const memory = Math.ceil(1.1 * gguf + kv);
  const name = `${model.label} as ${weights.toUpperCase()}`;
  let text = `${name}: a ${gb(checkpoint)} download, converted here as it streams into ${gb(gguf)} ` +
             `kept in this browser's cache; it needs about ${gb(memory)} of memory.`;
  let refusal = '';
  if (memory > kWasmMaxBytes) {
    refusal = `${name} needs about ${gb(memory)} of memory, more than a web page's engine can use ` +
              `(${gb(kWasmMaxBytes)}). Choose smaller weights (Q4_0 or Q8_0) or a smaller model.`;
  } else if (deviceMemory && memory > 0.75 * deviceMemory * 2 ** 30) {
    refusal = `${name} needs about ${gb(memory)} of memory; this device has about ${deviceMemory} GB, ` +
              'too little to hold it beside the browser. Choose smaller weights or a smaller model.';
  }
  if (!refusal && storageFree !== undefined && storageFree < gguf) {
    text += ` This browser would only let the page store ${gb(storageFree)} more, so it will not be kept: ` +
            'the next visit downloads it again.';
  }
  return {text, refusal, memory, disk: gguf};
}

// BASE/openai-community/<id>/resolve/main/<file>, Hugging Face's download path.
export function hfFileUrl(base, file, id = 'gpt2') {
  return `${base.replace(/\/+$/, '')}/openai-community/${id}/resolve/main/${file}`;
}

// The Cache API key of the GGUF converted from that repository: never fetched, only a name.
export function hfCacheKey(base, weights, id = 'gpt2') {
  return hfFileUrl(base, `${id}-${weights}.gguf`, id);
}
