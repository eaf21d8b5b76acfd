// The site on a static host that sets no headers (like GitHub Pages): served by serve.mjs
// WITHOUT --isolate, the site's own service worker (web/sw.js) must make the page cross-origin
// isolated so the threaded engine runs; with service workers off the page runs one thread and
// says so; after one visit it opens and generates with no network at all (the server shut down
// and the browser offline); a deploy (a new version.json) replaces the offline copy; and
// `build-site.sh --with-weights` output, served as is, opens its model with no other file.
// Every generation must give the native CLI's ids for the same model and seed.
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {startServer} from '../../scripts/serve.mjs';
import {artifact, kRoot, launchBrowser} from './browser.mjs';
import {generate, loadAndGenerate, makeModels, modelDir, nativeGenerate, openPage, waitForModel} from './fixtures.mjs';

const kSite = path.join(kRoot, 'build/site');
const kThreads = 3;  // more than 1 even on a one-core machine
const kModelUrl = 'models/tiny-q8_0.gguf';

const siteCaches = (page) => page.evaluate(async () => (await caches.keys()).filter((k) => k.startsWith('gpt2-site-')));
const cachedUrls = (page, name) => page.evaluate(async (n) => (await (await caches.open(n)).keys()).map((r) => r.url), name);

// A copy of build/site that a test may change (a "deploy") without touching the real one.
function copySite(name) {
  const dir = path.join(modelDir('static-host'), name);
  fs.rmSync(dir, {recursive: true, force: true});
  fs.cpSync(kSite, dir, {recursive: true});
  return dir;
}

function buildSite(dir, args) {
  fs.rmSync(dir, {recursive: true, force: true});
  return execFileSync('bash', [path.join(kRoot, 'scripts/build-site.sh'), ...args],
                      {env: {...process.env, GPT2_SITE_DIR: dir}, encoding: 'utf8'});
}

function manifestOf(dir) {
  const version = JSON.parse(fs.readFileSync(path.join(dir, 'version.json'), 'utf8'));
  assert.ok(version.model, 'version.json names the model');
  const manifestPath = path.join(dir, version.model.split('?')[0]);
  const manifest = JSON.parse(fs.readFileSync(manifestPath, 'utf8'));
  const bytes = Buffer.concat(manifest.parts.map((p) => fs.readFileSync(path.join(path.dirname(manifestPath), p))));
  return {version, manifest, manifestPath, bytes};
}

describe('a static host without COOP/COEP headers', {skip: !fs.existsSync(path.join(kSite, 'sw.js')) && 'build/site has no sw.js'}, () => {
  let models, expectedIds, browser;
  const consoleLines = [];

  before(async () => {
    models = makeModels('static-host');
    expectedIds = nativeGenerate(models.model);
    browser = await launchBrowser({serviceWorkers: 'allow'});
  });

  after(async () => {
    await browser?.close();
    if (consoleLines.length) console.log(consoleLines.join('\n'));
  });

  test('threads via the service worker, then offline, then a deploy replaces the offline copy', async () => {
    const site = copySite('site');
    const serve = (port = 0) => startServer({dir: site, port, quiet: true, mounts: [['/models', modelDir('static-host')]]});
    let server = await serve();
    const port = server.port;
    const url = `${server.url}?threads=${kThreads}&model=${kModelUrl}`;
    let page;
    try {
      // First visit: sw.js installs, the page reloads itself once and is then isolated.
      page = await openPage(browser, url, consoleLines);
      assert.equal(await page.evaluate(() => self.crossOriginIsolated), true, 'isolated with no headers from the server');
      assert.equal(await page.evaluate(() => !!navigator.serviceWorker.controller), true);
      await waitForModel(page);
      assert.deepEqual(await generate(page), expectedIds, 'ids equal `gpt2 generate` for the same seed');
      const stats = page.getByTestId('stats');
      assert.equal(await stats.getAttribute('data-isolated'), 'true');
      assert.equal(Number(await stats.getAttribute('data-threads')), kThreads, 'the engine reports its threads');
      assert.match(await stats.textContent(), new RegExp(`${kThreads} threads \\(cross-origin isolated\\)`));
      assert.equal(await page.getByTestId('threads-note').isVisible(), false);
      assert.ok(server.requests('/worker/gpt2-engine-mt-relaxed.wasm') >= 1);

      // The offline copy: this version's files, and no model (worker-load.js caches that, once).
      const version = JSON.parse(fs.readFileSync(path.join(site, 'version.json'), 'utf8'));
      await page.waitForFunction(async (v) => (await caches.keys()).includes(`gpt2-site-${v}`), version.version);
      assert.deepEqual(await siteCaches(page), [`gpt2-site-${version.version}`]);
      const siteUrls = await cachedUrls(page, `gpt2-site-${version.version}`);
      for (const f of [...version.files, 'version.json']) {
        assert.ok(siteUrls.includes(new URL(f, server.url).href), `${f} is kept for offline use`);
      }
      assert.ok(!siteUrls.some((u) => u.includes('/models/')), 'no model file in the site cache');
      assert.deepEqual(await cachedUrls(page, 'gpt2-models-v1'), [new URL(kModelUrl, server.url).href],
                       'the model cache holds the model alone');

      // No network at all: the server is gone and the browser is offline.
      await server.close();
      server = null;
      await browser.context.setOffline(true);
      await page.reload();
      await page.waitForFunction(() => !document.querySelector('[data-testid=load]').disabled, null, {timeout: 60_000});
      await waitForModel(page);
      assert.equal(await page.getByTestId('progress').getAttribute('data-source'), 'cache');
      assert.deepEqual(await generate(page), expectedIds, 'offline: the same ids');
      assert.equal(Number(await stats.getAttribute('data-threads')), kThreads, 'offline and still threaded');
      await page.screenshot({path: artifact('static-host-offline.png'), fullPage: true});

      // A deploy: another page and a new version.json. Online again, the first visit already
      // gets it, and the old version's cache is gone (the model's stays).
      const html = fs.readFileSync(path.join(site, 'index.html'), 'utf8');
      fs.writeFileSync(path.join(site, 'index.html'), html.replace(/<title>[^<]*/, '<title>Deployed again'));
      fs.writeFileSync(path.join(site, 'version.json'), JSON.stringify({...version, version: 'deploy-2'}));
      await browser.context.setOffline(false);
      server = await serve(port);
      await page.reload();
      await page.waitForFunction(() => !document.querySelector('[data-testid=load]').disabled, null, {timeout: 60_000});
      assert.equal(await page.title(), 'Deployed again');
      assert.deepEqual(await siteCaches(page), ['gpt2-site-deploy-2']);
      assert.equal((await cachedUrls(page, 'gpt2-models-v1')).length, 1);
      await server.close();
      server = null;
      await browser.context.setOffline(true);
      await page.reload();
      await page.waitForFunction(() => !document.querySelector('[data-testid=load]').disabled, null, {timeout: 60_000});
      assert.equal(await page.title(), 'Deployed again', 'offline: the new version');
    } finally {
      await browser.context.setOffline(false);
      await page?.close();
      await server?.close();
    }
  });

  test('service workers off: one thread, said in words, the same ids', async () => {
    const blocked = await launchBrowser({serviceWorkers: 'block'});
    const server = await startServer({dir: kSite, port: 0, quiet: true, mounts: [['/models', modelDir('static-host')]]});
    try {
      const page = await openPage(blocked, `${server.url}?threads=${kThreads}`, consoleLines);
      assert.equal(await page.evaluate(() => self.crossOriginIsolated), false);
      assert.deepEqual(await loadAndGenerate(page, kModelUrl), expectedIds);
      const stats = page.getByTestId('stats');
      assert.equal(await stats.getAttribute('data-threads'), '1');
      const note = page.getByTestId('threads-note');
      assert.equal(await note.isVisible(), true);
      assert.match(await note.textContent(), /^The engine runs on one thread: service workers are turned off in this browser/);
      assert.equal(server.requests('/worker/gpt2-engine-mt.wasm') + server.requests('/worker/gpt2-engine-mt-relaxed.wasm'), 0,
                   'the threaded engine was not loaded');
      await page.getByTestId('threads-note').screenshot({path: artifact('static-host-no-service-worker.png')});
    } finally {
      await server.close();
      await blocked.close();
    }
  });

  test('a service worker that does not isolate: one reload only, then one thread, said why', async () => {
    // E.g. an older sw.js still in charge: the guard in isolation.js must not reload forever.
    const site = copySite('site-inert-sw');
    fs.writeFileSync(path.join(site, 'sw.js'), `
      self.addEventListener('install', () => self.skipWaiting());
      self.addEventListener('activate', (e) => e.waitUntil(self.clients.claim()));
      self.addEventListener('fetch', (e) => e.respondWith(fetch(e.request)));`);
    const server = await startServer({dir: site, port: 0, quiet: true});
    let page;
    try {
      page = await openPage(browser, server.url, consoleLines);
      assert.equal(await page.evaluate(() => !!navigator.serviceWorker.controller), true);
      assert.equal(await page.evaluate(() => self.crossOriginIsolated), false);
      assert.equal(server.requests('/'), 2, 'the first load and one reload');
      assert.match(await page.getByTestId('threads-note').textContent(),
                   /^The engine runs on one thread: the page was reloaded under its service worker but is still not cross-origin isolated/);
      assert.equal(await page.getByTestId('stats').getAttribute('data-threads'), '1');
    } finally {
      await page?.close();
      await server.close();
    }
  });

  test('build-site.sh --with-weights: the folder alone, served as is, opens its model', async () => {
    const dir = path.join(modelDir('static-host'), 'site-with-weights');
    const partSize = Math.ceil(models.size / 3) + 17;  // not a divisor: the last part is short
    buildSite(dir, ['--with-weights', models.model, '--part-size', String(partSize)]);
    const {version, manifest, manifestPath, bytes} = manifestOf(dir);
    assert.equal(manifest.parts.length, 3);
    for (const p of manifest.parts) assert.ok(fs.statSync(path.join(path.dirname(manifestPath), p)).size <= partSize);
    assert.equal(manifest.size, models.size);
    assert.ok(bytes.equals(fs.readFileSync(models.model)), 'the parts are the GGUF, in order');
    assert.ok(!version.files.some((f) => f.startsWith('weights')), 'the service worker does not keep the model');

    // No mounts, no headers, under a sub-path like a GitHub Pages project site.
    const server = await startServer({dir, port: 0, quiet: true, base: '/repo/'});
    let page;
    try {
      page = await browser.context.newPage();
      const failed = [];
      page.on('response', (r) => { if (r.status() >= 400) failed.push(`${r.status()} ${r.url()}`); });
      page.on('requestfailed', (r) => failed.push(`failed ${r.url()}`));
      await page.goto(server.url);
      await waitForModel(page);  // opened by default, no click
      assert.equal(await page.getByTestId('model-url').inputValue(), version.model);
      assert.deepEqual(await generate(page), expectedIds);
      assert.deepEqual(failed, []);
      assert.equal(await page.evaluate(() => self.crossOriginIsolated), true);
      assert.equal(await page.evaluate(async () => (await navigator.serviceWorker.getRegistration()).scope),
                   server.url, 'the service worker covers the site folder');
    } finally {
      await page?.close();
      await server.close();
    }
  });

  test('build-site.sh: --with-weights defaults to the real GPT-2 if present, else the small model; without it no model', () => {
    const dir = path.join(modelDir('static-host'), 'site-default-weights');
    buildSite(dir, ['--with-weights']);
    const real = path.join(kRoot, 'weights/gpt2-q8_0.gguf');
    const expected = fs.existsSync(real) ? real : path.join(kRoot, 'weights/gpt2-tiny-q8_0.gguf');
    const {manifest, manifestPath, bytes} = manifestOf(dir);
    assert.equal(path.basename(manifestPath), path.basename(expected, '.gguf') + '.manifest.json');
    assert.equal(manifest.size, fs.statSync(expected).size);
    assert.ok(bytes.equals(fs.readFileSync(expected)));
    for (const p of manifest.parts) assert.ok(fs.statSync(path.join(path.dirname(manifestPath), p)).size <= 24 * 1024 * 1024);
    fs.rmSync(dir, {recursive: true, force: true});

    const plain = JSON.parse(fs.readFileSync(path.join(kSite, 'version.json'), 'utf8'));
    assert.equal(plain.model, undefined);
    assert.equal(fs.existsSync(path.join(kSite, 'weights')), false);
    assert.throws(() => buildSite(dir, ['--with-weights', path.join(kRoot, 'README.md')]), /not a GGUF file/);
  });
});
