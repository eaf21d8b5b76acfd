// The circuits jobs (issue 28): head detection, each a short sequence of the engine's calls
// (src/lab/head_scores.h through src/bindings/embind.cc). worker-jobs.js creates this part and
// hands it the engine it holds; protocol.js documents the messages.

import {ErrorKind, Msg, errorMessage} from './protocol.js';

const kEndOfText = 50256;

// engine(), info(): the loaded engine and its model's info (null while none is loaded);
// bytesToPieces(ids): each id's text.
export function createCircuits({post, engine, info, bytesToPieces}) {
  // `gpt2 heads`'s ids, or the distinct tokens of `text` in order, as many as fit twice in the
  // context after <|endoftext|>.
  function headIds(text) {
    if (!text) return Array.from(engine().defaultHeadIds());
    const max = Math.floor((info().n_ctx - 1) / 2);
    const ids = [...new Set(engine().tokenize(text))].slice(0, max);
    if (!ids.length) throw new Error('Type some text whose tokens the heads should see repeated.');
    return ids;
  }

  // Scores of the plain model, as `gpt2 heads` gives them; the conversation is then the repeated
  // sequence, captured, so a head's attention on it can be opened.
  function handleHeads(msg) {
    const started = performance.now();
    try {
      if (!info()) throw new Error('Load a model first.');
      const ids = headIds(msg.text);
      engine().setInterventions({});
      const s = engine().detectHeads(ids);
      const sequence = [kEndOfText, ...ids, ...ids];
      post({type: Msg.heads, ids, sequence, pieces: bytesToPieces(sequence), repeat: s.repeat, nLayer: s.nLayer,
            nHead: s.nHead, prev: s.prev, dup: s.dup, induction: s.induction, uniform: s.uniform,
            ms: performance.now() - started}, [s.prev.buffer, s.dup.buffer, s.induction.buffer]);
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.heads, message: errorMessage(e)});
    }
  }

  return {heads: handleHeads};
}
