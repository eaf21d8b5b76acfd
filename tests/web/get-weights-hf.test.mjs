// scripts/get-weights.sh against a local server laid out and answering like Hugging Face (the
// 302 to a CDN with X-Linked-Size and X-Linked-ETag): it downloads, verifies and converts; a
// stated hash or size the bytes do not match stops it with a clear message and no model file.
// The result is read back by the native CLI, an independent reader of the GGUF.
import assert from 'node:assert/strict';
import {execFileSync, spawn} from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {after, before, test} from 'node:test';
import {kRoot} from './browser.mjs';
import {makeCheckpoint, startFakeHf} from './fake-hf.mjs';

const kScript = path.join(kRoot, 'scripts/get-weights.sh');
const kCli = path.join(kRoot, 'build/native/gpt2');
const skip = !fs.existsSync(path.join(kRoot, 'build/native/gpt2-convert')) && 'build/native not built';

let files;
before(() => { files = makeCheckpoint(kRoot); });

// Runs the script asynchronously (the fake server lives in this process).
function getWeights(url, dir, args = []) {
  return new Promise((resolve) => {
    const child = spawn('bash', [kScript, ...args], {
      env: {...process.env, GPT2_WEIGHTS_URL: url, GPT2_WEIGHTS_DIR: dir}, stdio: ['ignore', 'pipe', 'pipe']});
    let stdout = '', stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    child.on('close', (status) => resolve({status, stdout, stderr}));
  });
}

const tmpDir = () => fs.mkdtempSync(path.join(os.tmpdir(), 'gpt2-weights-'));
const ggufs = (dir) => fs.readdirSync(dir).filter((f) => f.endsWith('.gguf'));
const dirs = [];
after(() => dirs.forEach((d) => fs.rmSync(d, {recursive: true, force: true})));

test('downloads through the CDN redirect, verifies size and SHA-256, converts', {skip}, async () => {
  const hf = await startFakeHf({files});
  const dir = tmpDir();
  dirs.push(dir);
  try {
    const r = await getWeights(hf.url, dir);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /model\.safetensors verified \(size and SHA-256 as stated\)/);
    assert.match(r.stdout, /vocab\.json verified \(size as stated\)/);
    // The weights came through the redirect, as from huggingface.co.
    assert.ok(hf.requests.some((q) => /^GET \/cdn\/[0-9a-f]{64}\/model\.safetensors$/.test(q)), hf.requests.join('\n'));
    assert.deepEqual(fs.readFileSync(path.join(dir, 'hf/model.safetensors')), files['model.safetensors']);
    assert.deepEqual(ggufs(dir).sort(), ['gpt2-q4_0.gguf', 'gpt2-q8_0.gguf']);
    const info = execFileSync(kCli, ['info', '--model', path.join(dir, 'gpt2-q8_0.gguf')], {encoding: 'utf8'});
    assert.match(info, /n_layer\D+1\b/);
    assert.match(info, /n_embd\D+32\b/);
    // A second run finds the files present and verified, and downloads nothing.
    const before = hf.requests.filter((q) => q.startsWith('GET')).length;
    const again = await getWeights(hf.url, dir);
    assert.equal(again.status, 0, again.stderr);
    assert.match(again.stdout, /model\.safetensors present and verified/);
    assert.equal(hf.requests.filter((q) => q.startsWith('GET')).length, before);
  } finally {
    await hf.close();
  }
});

test('a wrong SHA-256 stops with a clear message and writes no model file', {skip}, async () => {
  const hf = await startFakeHf({files, tamper: {'model.safetensors': {sha256: 'ab'.repeat(32)}}});
  const dir = tmpDir();
  dirs.push(dir);
  try {
    const r = await getWeights(hf.url, dir);
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /model\.safetensors failed verification: its SHA-256 is [0-9a-f]{64}, the server states (ab){32}/);
    assert.match(r.stderr, /no model file was written/);
    assert.deepEqual(ggufs(dir), []);
    assert.ok(!fs.existsSync(path.join(dir, 'hf/model.safetensors')));
    assert.ok(!fs.existsSync(path.join(dir, 'hf/model.safetensors.part')), 'the bad download is deleted');
  } finally {
    await hf.close();
  }
});

test('a download shorter than the stated size stops and keeps the part to resume', {skip}, async () => {
  const short = files['model.safetensors'].subarray(0, 1000);
  const hf = await startFakeHf({files, tamper: {'model.safetensors': {body: short}}});
  const dir = tmpDir();
  dirs.push(dir);
  try {
    const r = await getWeights(hf.url, dir);
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.match(r.stderr, new RegExp(`it is 1000 bytes, the server states ${files['model.safetensors'].length}`));
    assert.deepEqual(ggufs(dir), []);
    assert.equal(fs.statSync(path.join(dir, 'hf/model.safetensors.part')).size, 1000);
  } finally {
    await hf.close();
  }
});
