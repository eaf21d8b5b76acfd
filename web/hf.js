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

// BASE/openai-community/<id>/resolve/main/<file>, Hugging Face's download path.
export function hfFileUrl(base, file, id = 'gpt2') {
  return `${base.replace(/\/+$/, '')}/openai-community/${id}/resolve/main/${file}`;
}

// The Cache API key of the GGUF converted from that repository: never fetched, only a name.
export function hfCacheKey(base, weights, id = 'gpt2') {
  return hfFileUrl(base, `${id}-${weights}.gguf`, id);
}
