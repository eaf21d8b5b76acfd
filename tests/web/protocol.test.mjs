// The page and the worker name their messages only through web/shared/protocol.js: no message type,
// error kind or progress phase is spelled out as a string literal in another module, and every
// message the page sends has a handler in the worker's dispatcher (web/worker/worker.js), and every
// request that computes on the model goes through compute(), which adds the store's
// interventions (issue 35: the store is their one owner).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import {describe, test} from 'node:test';
import {kRoot} from './browser.mjs';
import {ErrorKind, Msg, Phase, kComputes} from '../../web/shared/protocol.js';

const kWeb = path.join(kRoot, 'web');
// Every module of the page, its views, its worker and what both import (web/ and its folders).
const sources = fs.readdirSync(kWeb, {recursive: true})
    .filter((f) => f.endsWith('.js') && f !== path.join('shared', 'protocol.js') && f !== 'sw.js')
    .map((f) => ({file: f, text: fs.readFileSync(path.join(kWeb, f), 'utf8')}));
// app.js and its panels (app-*.js), which send the page's messages.
const pageText = () => fs.readdirSync(path.join(kWeb, 'page')).filter((f) => /^app(-[\w-]+)?\.js$/.test(f))
    .map((f) => fs.readFileSync(path.join(kWeb, 'page', f), 'utf8')).join('\n');
const quoted = (name) => `'${name}'`;

describe('the message protocol', () => {
  test('message types, error kinds and phases are written only in protocol.js', () => {
    const found = [];
    for (const {file, text} of sources) {
      text.split('\n').forEach((line, i) => {
        const code = line.replace(/\/\/.*$/, '');
        const patterns = [
          ...Object.values(Msg).map((t) => [`type: ${quoted(t)}`, `case ${quoted(t)}`, `type === ${quoted(t)}`]).flat(),
          ...Object.values(ErrorKind).map((k) => [`kind: ${quoted(k)}`, `kind === ${quoted(k)}`]).flat(),
          ...Object.values(Phase).map((p) => [`phase: ${quoted(p)}`, `phase === ${quoted(p)}`]).flat(),
        ];
        for (const p of patterns) if (code.includes(p)) found.push(`${file}:${i + 1}: ${line.trim()}`);
      });
    }
    assert.ok(sources.length >= 50, `read ${sources.length} modules`);
    assert.deepEqual(found, []);
  });

  test('every message the page sends has a handler in the worker', () => {
    const page = pageText();
    const worker = fs.readFileSync(path.join(kWeb, 'worker', 'worker.js'), 'utf8');
    const sent = [...new Set([...page.matchAll(/(?:postMessage|compute)\(\{\s*type: Msg\.(\w+)/g)].map((m) => m[1]))];
    assert.ok(sent.length >= 10, `the page sends ${sent.length} kinds of message`);
    const handled = new Set([...worker.matchAll(/^\s+\[Msg\.(\w+)\]:/gm)].map((m) => m[1]));
    assert.deepEqual(sent.filter((name) => !handled.has(name)), []);
    for (const name of sent) assert.ok(name in Msg, `Msg.${name} exists`);
  });

  test('the requests that compute on the model carry the store\'s interventions (compute), the others not', () => {
    const page = pageText();
    const names = (re) => new Set([...page.matchAll(re)].map((m) => Msg[m[1]]));
    const posted = names(/postMessage\(\{\s*type: Msg\.(\w+)/g);
    const computed = names(/compute\(\{\s*type: Msg\.(\w+)/g);
    assert.deepEqual(kComputes.filter((t) => posted.has(t)), [], 'sent without the interventions');
    assert.deepEqual([...computed].filter((t) => !kComputes.includes(t)), [], 'sent with interventions it does not use');
    assert.deepEqual(kComputes.filter((t) => !computed.has(t)), [], 'never sent');
    // compute() itself: the one place the page adds them.
    assert.match(page, /const compute = \(msg\) => worker\.postMessage\(\{\.\.\.msg, interventions: state\.interventions\}\);/);
  });

  test('the results the replies carry are documented with the fields embind.cc declares', () => {
    // Each Shape<X>("X") of the bindings, its JS field names in order (clang-format may wrap a
    // call before its name).
    const bindings = fs.readFileSync(path.join(kRoot, 'src/bindings/embind.cc'), 'utf8');
    const declared = new Map();
    for (const chunk of bindings.split('Shape<').slice(1)) {
      const name = /^(\w+)>/.exec(chunk)[1];
      const body = chunk.split('// The methods.')[0];
      declared.set(name, [...body.matchAll(/\.(?:field|computed)\(\s*"(\w+)"|\.array<[^>]*>\(\s*"(\w+)"\)/g)]
          .map((m) => m[1] ?? m[2]));
    }
    assert.ok(declared.size >= 20, `read ${declared.size} Shapes`);
    const doc = fs.readFileSync(path.join(kWeb, 'shared', 'protocol.js'), 'utf8').split('\nexport ')[0];
    const [replies, results] = doc.split('\n// Results:');
    assert.ok(results, 'protocol.js lists the results');
    const text = results.replace(/^\/\/ ?/gm, ' ');
    const documented = new Map([...text.matchAll(/\b([A-Z]\w+) \{([^}]*)\}/g)]
        .map((m) => [m[1], m[2].split(',').map((f) => f.trim())]));
    for (const [name, fields] of documented) assert.deepEqual(fields, declared.get(name), `${name}'s fields`);
    const used = new Set([...doc.matchAll(/\.\.\.([A-Z]\w+)/g)].map((m) => m[1]));
    assert.ok(used.size >= 15, `${used.size} replies carry a Shape`);
    for (const name of used) assert.ok(documented.has(name), `${name} is listed under Results`);
    assert.ok(replies.includes('{type:\'experiment\', ...ExperimentResult'));
  });

  test('the names are unique per direction', () => {
    const values = Object.values(Msg);
    // A few names are a request and its reply at once (e.g. 'export'); none is two keys.
    assert.equal(new Set(values).size, values.length);
  });
});
