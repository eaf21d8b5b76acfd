// Where "Get GPT-2 small from Hugging Face" reads from and what it keeps, for the page and its
// worker alike. `base` is https://huggingface.co or the page's ?hf=BASE.

export const kHfWeights = ['q8_0', 'q4_0', 'f16'];

// BASE/openai-community/gpt2/resolve/main/<file>, Hugging Face's download path.
export function hfFileUrl(base, file) {
  return `${base.replace(/\/+$/, '')}/openai-community/gpt2/resolve/main/${file}`;
}

// The Cache API key of the GGUF converted from that repository: never fetched, only a name.
export function hfCacheKey(base, weights) {
  return hfFileUrl(base, `gpt2-${weights}.gguf`);
}
