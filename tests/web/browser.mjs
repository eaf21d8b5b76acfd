// Shared setup for the browser tests: Debian's Chromium (never a downloaded browser) driven by
// playwright-core, a fresh profile per launch, and the site served by scripts/serve.mjs.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {fileURLToPath} from 'node:url';
import {chromium} from 'playwright-core';
import {startServer} from '../../scripts/serve.mjs';

export const kRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const kArtifacts = path.join(kRoot, 'test-artifacts');
const kChromium = process.env.CHROMIUM || '/usr/bin/chromium';

// A persistent context so a "second visit" (a new page in the same profile) sees the Cache API
// storage of the first; close() removes the profile. Service workers are blocked unless a test
// asks for them ({serviceWorkers: 'allow'}, static-host.test.mjs): the site's sw.js would make
// every page cross-origin isolated and reload it once, which the other tests are not about.
export async function launchBrowser({serviceWorkers = 'block'} = {}) {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'gpt2-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: kChromium,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: {width: 1280, height: 900},
    serviceWorkers,
  });
  return {
    context,
    async close() {
      await context.close();
      fs.rmSync(profile, {recursive: true, force: true});
    },
  };
}

// isolate: send COOP/COEP so the page is cross-origin isolated (SharedArrayBuffer, threads).
export async function serveSite({site = path.join(kRoot, 'build/site'), models, base = '/', isolate = false} = {}) {
  return startServer({dir: site, port: 0, quiet: true, base, isolate,
                      mounts: models ? [[base + 'models', models]] : []});
}

export function artifact(name) {
  fs.mkdirSync(kArtifacts, {recursive: true});
  return path.join(kArtifacts, name);
}

// Collects console errors and page errors so a test can print them when it fails.
export function watchConsole(page) {
  const lines = [];
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') lines.push(`[${m.type()}] ${m.text()}`); });
  page.on('pageerror', (e) => lines.push(`[pageerror] ${e.message}`));
  return lines;
}

// Waits until the page has a model (the progress bar full, its source named) or shows an error,
// which is thrown.
export async function waitLoaded(page, timeout = 60_000) {
  await page.waitForFunction(() => {
    const bar = document.querySelector('[data-testid=progress]');
    const err = document.querySelector('[data-testid=error]');
    return (bar.value === 100 && bar.dataset.source) || !err.hidden;
  }, null, {timeout});
  const err = page.getByTestId('error');
  if (await err.isVisible()) throw new Error(`page error while loading: ${await err.textContent()}`);
}

// A browser on the site with `models` mounted at models/, one page open at `query` with its model
// loaded (waitLoaded); the page's console errors and warnings gather in consoleLines. If it fails,
// what it started is closed.
export async function openSite({site, models, query = '?model=models/tiny-q8_0.gguf&debug=1', timeout = 60_000}) {
  const server = await serveSite({site, models});
  let browser;
  try {
    browser = await launchBrowser();
    const page = await browser.context.newPage();
    const consoleLines = watchConsole(page);
    try {
      await page.goto(server.url + query);
      await waitLoaded(page, timeout);
    } catch (e) {
      e.message += consoleLines.length ? `\nthe page's console:\n${consoleLines.join('\n')}` : '';
      throw e;
    }
    return {server, browser, page, consoleLines};
  } catch (e) {
    await browser?.close();
    await server.close();
    throw e;
  }
}

// Waits until a model converted in the page (Hugging Face) is in the browser's cache: the page
// announces it ready first and writes it in the background.
export async function waitCached(page, timeout = 60_000) {
  await page.waitForFunction(() => document.querySelector('[data-testid=progress]').dataset.cached === 'true' ||
                                   !document.querySelector('[data-testid=error]').hidden, null, {timeout});
  const err = page.getByTestId('error');
  if (await err.isVisible()) throw new Error(`page error while caching: ${await err.textContent()}`);
}

// Generates with sampling s ({temperature, topK, topP, seed, maxTokens}) and returns the ids.
export async function generateIds(page, prompt, s, timeout = 60_000) {
  for (const [id, v] of [['temperature', s.temperature], ['top-k', s.topK], ['top-p', s.topP],
                         ['seed', s.seed], ['max-tokens', s.maxTokens]]) {
    await page.getByTestId(id).fill(String(v));
  }
  await page.getByTestId('prompt').fill(prompt);
  await page.getByTestId('generate').click();
  await page.waitForFunction(() => document.querySelector('[data-testid=stats]').dataset.reason ||
                                   !document.querySelector('[data-testid=error]').hidden, null, {timeout});
  return (await page.getByTestId('output-ids').textContent()).trim().split(/\s+/).map(Number);
}
