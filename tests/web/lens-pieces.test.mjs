// The worker's logit lens in pieces (web/worker/worker-jobs.js), on the page's engine under Node: a
// window computed a block at a time, interrupted by a waiting message and finished later, equals
// the window computed in one call; a message that changes the capture drops the unfinished one.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import {before, describe, test} from 'node:test';
import {kNodeModule, makeModels, nodeEngine} from './fixtures.mjs';
import {Msg} from '../../web/shared/protocol.js';
import {createJobs} from '../../web/worker/worker-jobs.js';


describe('logit lens in pieces', {skip: !fs.existsSync(kNodeModule) && 'build/wasm not built'}, () => {
  let engine, info;
  const ids = [464, 2068, 7586, 21831, 18045, 625, 262, 16931];

  before(async () => {
    const models = makeModels('node');
    ({engine, info} = await nodeEngine(models.model));
    assert.ok(info.n_layer >= 2, 'the test needs a window of more than one piece');
  });

  function makeJobs() {
    const posted = [];
    const state = {busy: false};
    const jobs = createJobs({post: (m) => posted.push(m), yieldToEvents: () => new Promise((r) => setImmediate(r)),
                             busy: () => state.busy, lensPiece: 1});
    jobs.attach(engine, info);
    engine.reset();
    engine.setCapture(true);
    engine.prefill(ids);
    return {jobs, posted, state};
  }
  const lensReplies = (posted) => posted.filter((m) => m.type === Msg.lens);

  test('interrupted by a waiting message, finished in the background: equals one whole call', async () => {
    const {jobs, posted, state} = makeJobs();
    state.busy = true;
    await jobs.inspect({position: 5});
    assert.ok(posted.some((m) => m.type === Msg.lensStart), 'the window was started');
    assert.equal(lensReplies(posted).length, 0, 'a waiting message goes first: the window waits');
    state.busy = false;
    await jobs.background();
    const [lens] = lensReplies(posted);
    assert.ok(lens, 'the window is finished in the background');
    const whole = engine.logitLens(lens.begin, lens.end, lens.topK, 0, info.n_layer);
    assert.equal(lens.nLayer, info.n_layer);
    assert.ok(lens.begin <= 5 && 5 < lens.end);
    assert.deepEqual(lens.ids, Array.from(whole.ids));
    assert.deepEqual(lens.probs, Array.from(whole.probs));
    await jobs.background();
    assert.equal(lensReplies(posted).length, 1, 'nothing is left to run');
  });

  test('a dropped window is never posted; a new inspect starts its own', async () => {
    const {jobs, posted, state} = makeJobs();
    state.busy = true;
    await jobs.inspect({position: 3});
    jobs.dropBackground();
    state.busy = false;
    await jobs.background();
    assert.equal(lensReplies(posted).length, 0);
    await jobs.inspect({position: 7});
    const [lens] = lensReplies(posted);
    assert.ok(lens && lens.begin <= 7 && 7 < lens.end);
    assert.deepEqual(lens.ids, Array.from(engine.logitLens(lens.begin, lens.end, lens.topK, 0, info.n_layer).ids));
  });

  test('a block range outside the model is an error', () => {
    assert.throws(() => engine.logitLens(0, 2, 5, 0, info.n_layer + 1), /blocks/);
    assert.throws(() => engine.logitLens(0, 2, 5, 1, 1), /blocks/);
  });
});
