// The page's interventions, owned by its store (issue 35): every request that computes on the
// model carries them, the worker makes the engine run under them (worker-under.js), and each
// reply echoes what it ran under (`under`), which the page writes beside the result. Their form
// is engine.setInterventions's spec (src/bindings/embind.cc): {ablateHeads: [[layer, head], ...],
// meanAblation, skipAttn: [layer, ...], skipMlp, noResidual, postNorm, sae: [{id, steer:
// [[feature, alpha], ...], clamp: [[feature, value], ...]}]}; meanAblation: the knocked-out heads
// take their mean output over the prompt in the plain model.

export const kNoInterventions = Object.freeze({ablateHeads: [], meanAblation: false, skipAttn: [], skipMlp: [],
                                               noResidual: [], postNorm: false});

const list = (x) => (Array.isArray(x) ? x : []);
const byNumber = (a, b) => a - b;
const pairs = (x) => list(x).map(([a, b]) => [Number(a), Number(b)]).sort((p, q) => p[0] - q[0] || p[1] - q[1]);

// Every field present, lists sorted, empty SAE entries left out: two specs that change the model
// alike have the same form (and the same key).
export function canonical(iv = {}) {
  const sae = list(iv.sae).map(({id, steer, clamp}) => ({id: Number(id), steer: pairs(steer), clamp: pairs(clamp)}))
      .filter((s) => s.steer.length || s.clamp.length).sort((a, b) => a.id - b.id);
  return {
    ablateHeads: pairs(iv.ablateHeads), meanAblation: !!iv.meanAblation && list(iv.ablateHeads).length > 0,
    skipAttn: list(iv.skipAttn).map(Number).sort(byNumber), skipMlp: list(iv.skipMlp).map(Number).sort(byNumber),
    noResidual: list(iv.noResidual).map(Number).sort(byNumber), postNorm: !!iv.postNorm, sae,
  };
}

export const interventionsKey = (iv) => JSON.stringify(canonical(iv));

export const isPlain = (iv) => interventionsKey(iv) === interventionsKey({});

const blocks = (what, ls) => `${what} in block${ls.length > 1 ? 's' : ''} ${ls.join(', ')}`;

// In a few words, e.g. "2 heads knocked out (1.3, 2.0), SAE clamp L1 #5 = 3"; saes: the loaded
// SAEs ({id, layer}), to name an SAE's block.
export function describeInterventions(iv, saes = []) {
  const c = canonical(iv);
  const words = [];
  const n = c.ablateHeads.length;
  if (n) {
    words.push(`${n} head${n > 1 ? 's' : ''} knocked out${c.meanAblation ? ' to the mean' : ''} ` +
               `(${c.ablateHeads.map(([l, h]) => `${l}.${h}`).join(', ')})`);
  }
  if (c.skipAttn.length) words.push(blocks('attention skipped', c.skipAttn));
  if (c.skipMlp.length) words.push(blocks('MLP skipped', c.skipMlp));
  if (c.noResidual.length) words.push(blocks('no residual', c.noResidual));
  if (c.postNorm) words.push('post-norm');
  for (const {id, steer, clamp} of c.sae) {
    const sae = saes.find((x) => x.id === id);
    const where = sae ? `L${sae.layer}` : `SAE ${id}`;
    for (const [f, v] of steer) words.push(`SAE steer ${where} #${f} by ${v}`);
    for (const [f, v] of clamp) words.push(`SAE clamp ${where} #${f} = ${v}`);
  }
  return words.length ? words.join(', ') : 'plain model';
}
