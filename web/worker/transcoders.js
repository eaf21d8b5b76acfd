// Transcoders for attribution graphs, for the worker (worker-graph.js): where the public GPT-2
// small set lives on Hugging Face, a folder laid out like it, and what a block costs in memory.

// Dunefsky, Chlenski and Nanda (2024): one ReLU transcoder per block of GPT-2 small, reading
// blocks.L.ln2.hook_normalized and standing in for blocks.L.hook_mlp_out, 24,576 features.
export const kHfTranscoderRepo = 'jacobdunefsky/gpt2small-transcoders';
export const kTranscoderFiles = ['sae.json', 'sae.safetensors'];

// Block L's folder in the set: gpt2-convert --transcoders reads the same names.
export const transcoderFolder = (layer) => `gpt2-small-dun-chl-mlp-tc${layer}`;

// Block L's two files under a folder URL that holds the set (the Hugging Face repository's
// resolve/main/ is one such folder).
export function transcoderUrls(folder, layer, baseUrl) {
  const dir = new URL(`${transcoderFolder(layer)}/`, new URL(folder.replace(/\/*$/, '/'), baseUrl)).href;
  return {json: new URL(kTranscoderFiles[0], dir).href, weights: new URL(kTranscoderFiles[1], dir).href};
}

export function hfTranscoderFolder(base) {
  return `${base.replace(/\/+$/, '')}/${kHfTranscoderRepo}/resolve/main/`;
}

// Bytes of one block of d_in x d_sae: while converting (its f32 checkpoint held whole beside the
// output) and once loaded. Q8_0 encoder and decoder (gpt2-convert --transcoders' choice), f32
// biases.
export function transcoderBytes(dIn, dSae) {
  const matrix = dIn * dSae, vectors = dSae + dIn;
  const loaded = Math.ceil(2 * matrix * 34 / 32 + vectors * 4);
  const checkpoint = (2 * matrix + vectors) * 4;
  return {checkpoint, loaded, peak: checkpoint + loaded};
}
