// scripts/get-weights.sh without network access: a clear message, a non-zero exit, and no file
// created or changed. The mirror URL points at a closed local port, so this also holds on a
// connected machine.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { repoRoot } from './wllama-harness.mjs';

function listing(dir) {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { recursive: true }).sort().map((f) => {
    const st = fs.statSync(path.join(dir, f));
    return `${f} ${st.size} ${st.mtimeMs}`;
  });
}

test('get-weights.sh offline: says why, exits non-zero, touches nothing', () => {
  const weights = path.join(repoRoot, 'weights');
  const before = listing(weights);
  const r = spawnSync('bash', [path.join(repoRoot, 'scripts/get-weights.sh'), '--split', '95M'], {
    encoding: 'utf8',
    env: { ...process.env, GPT2_WEIGHTS_URL: 'http://127.0.0.1:9/openai-community/gpt2' },
  });
  assert.equal(r.status, 3, `expected exit 3, got ${r.status}: ${r.stderr}`);
  assert.match(r.stderr, /cannot reach huggingface\.co/);
  assert.match(r.stderr, /nothing was downloaded or changed/);
  assert.deepEqual(listing(weights), before);
});
