// The circuits jobs (issue 28): head detection and the quantization lens, each a short sequence of the engine's calls
// (src/lab/head_scores.h through src/bindings/embind.cc). worker-jobs.js creates this part and
// hands it the engine it holds; protocol.js documents the messages.

import {canonical} from '../shared/interventions.js';
import {ErrorKind, Msg, errorMessage} from '../shared/protocol.js';
import {reply} from './reply.js';

const kEndOfText = 50256;

// engine(), info(): the loaded engine and its model's info (null while none is loaded);
// bytesToPieces(ids): each id's text; under: what the engine computes under (worker-under.js).
// Both run the plain model, whatever the page's interventions, and say so (`under`).
export function createCircuits({post, engine, info, bytesToPieces, under}) {
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
      under.ran({});
      const sequence = [kEndOfText, ...ids, ...ids];
      reply(post, Msg.heads, canonical({}), s, {ids, sequence, pieces: bytesToPieces(sequence), ms: performance.now() - started});
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.heads, message: errorMessage(e)});
    }
  }

  // The re-encoded twin the engine holds: which weights, made on which engine (a new model is a
  // new engine, which has none).
  let second = {engine: null, weights: ''};

  // The lens between the loaded model and its twin re-encoded as msg.weights, on the prompt.
  function handleQuantLens(msg) {
    const started = performance.now();
    try {
      if (!info()) throw new Error('Load a model first.');
      const ids = Array.from(engine().tokenize(msg.prompt || ''));
      if (!ids.length) throw new Error('Type a prompt first: the two models run on its tokens.');
      let made = null;
      if (second.engine !== engine() || second.weights !== msg.weights) {
        second = {engine: null, weights: ''};
        made = engine().quantizeSecond(msg.weights);
        second = {engine: engine(), weights: msg.weights, bytes: made.file_bytes};
      }
      const r = engine().compareSecond(ids);
      under.ran({});  // the lab runs A plain (lab/compare.h)
      reply(post, Msg.quantLens, canonical({}), r, {weights: msg.weights, ids, pieces: bytesToPieces(ids), nLayer: info().n_layer,
                                                    nHead: info().n_head, targetPiece: bytesToPieces([r.attribution.target])[0],
                                                    secondBytes: second.bytes, ms: performance.now() - started});
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.quantLens, message: errorMessage(e)});
    }
  }

  // Frees the twin (before another model loads: its memory is not counted by the loader).
  function dropSecond() {
    if (second.engine && second.engine === engine()) engine().dropSecond();
    second = {engine: null, weights: ''};
  }

  return {heads: handleHeads, quantLens: handleQuantLens, dropSecond};
}
