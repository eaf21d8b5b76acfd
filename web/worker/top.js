// The k largest of n scores, without sorting all n (an MLP has 6,400 neurons a block at GPT-2 XL,
// the vocabulary 50,257 tokens): indices in descending score, ties to the lower index.
export function topIndices(n, k, score) {
  const top = [];  // descending
  for (let i = 0; i < n; ++i) {
    const s = score(i);
    if (top.length === k && !(s > score(top[k - 1]))) continue;
    let j = Math.min(top.length, k - 1);
    while (j > 0 && s > score(top[j - 1])) --j;
    top.splice(j, 0, i);
    if (top.length > k) top.pop();
  }
  return top;
}
