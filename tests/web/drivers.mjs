// One small driver interface for tests that run in both browsers (browsers.test.mjs): Debian's
// Chromium through playwright-core (browser.mjs's launchBrowser) and Debian's Firefox ESR through
// puppeteer-core over WebDriver BiDi (Playwright drives only its own Firefox build, which is not
// packaged here). Neither tool may download a browser: puppeteer-core never does, and
// scripts/install-deps.sh sets PUPPETEER_SKIP_DOWNLOAD anyway.
//
// A page here has only what those tests use: elements are CSS selectors, or data-testid values
// where the method says so, and every wait takes its timeout.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import puppeteer from 'puppeteer-core';
import {launchBrowser} from './browser.mjs';

export const kFirefox = process.env.FIREFOX || '/usr/bin/firefox-esr';
// GPT2_BROWSERS=chromium (or firefox) runs the two-browser tests in one of them only.
export const kBrowsers = (process.env.GPT2_BROWSERS || 'chromium,firefox').split(',');
const kViewport = {width: 1280, height: 900};

// Preferences on top of puppeteer's own for Firefox (which already turn off updates, telemetry
// uploads, Safe Browsing and first-run pages): the services that would call home are off too.
// Service workers are off as the Chromium tests block them (browser.mjs): sw.js would reload the
// page once to make it isolated, which the server's COOP/COEP headers do here.
const kFirefoxPrefs = {
  // Remote settings (blocklists, certificate revocation lists, ...) from a closed local port: this
  // pref counts only with MOZ_REMOTE_SETTINGS_DEVTOOLS=1 (set below).
  'services.settings.server': 'http://127.0.0.1:1/v1',
  'network.captive-portal-service.enabled': false,
  'network.connectivity-service.enabled': false,
  'network.dns.disablePrefetch': true,
  'network.prefetch-next': false,
  'app.update.enabled': false,
  'toolkit.telemetry.enabled': false,
  'toolkit.telemetry.server': '',
  'browser.ping-centre.telemetry': false,
  'browser.region.network.url': '',
  'browser.region.update.enabled': false,
  'extensions.blocklist.enabled': false,
  'media.gmp-gmpopenh264.enabled': false,
  'messaging-system.rsexperimentloader.enabled': false,
  'app.shield.optoutstudies.enabled': false,
  'dom.serviceWorkers.enabled': false,
};

// A proxy that answers nothing and notes what was asked of it: Firefox sends it every request
// but those to localhost (which never go through a proxy), so any request beyond the test's
// server ends here, and close() fails naming it.
async function startDeadProxy() {
  const asked = [];
  const sockets = new Set();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.once('data', (d) => { asked.push(d.toString('latin1').split('\r\n')[0]); socket.destroy(); });
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: server.address().port, asked,
    close: () => new Promise((resolve) => { sockets.forEach((s) => s.destroy()); server.close(resolve); }),
  };
}

// Firefox ESR headless with a fresh profile, removed again by close(). It runs as root too.
async function launchFirefox() {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'gpt2-firefox-'));
  const proxy = await startDeadProxy();
  const browser = await puppeteer.launch({
    browser: 'firefox', executablePath: kFirefox, headless: true, userDataDir: profile,
    extraPrefsFirefox: {...kFirefoxPrefs, 'network.proxy.type': 1, 'network.proxy.share_proxy_settings': true,
                        'network.proxy.http': '127.0.0.1', 'network.proxy.http_port': proxy.port,
                        'network.proxy.ssl': '127.0.0.1', 'network.proxy.ssl_port': proxy.port},
    defaultViewport: kViewport,
    env: {...process.env, MOZ_HEADLESS: '1', MOZ_CRASHREPORTER_DISABLE: '1', MOZ_REMOTE_SETTINGS_DEVTOOLS: '1'},
  });
  return {
    newPage: async () => firefoxPage(await browser.newPage()),
    async close() {
      await browser.close();
      await proxy.close();
      fs.rmSync(profile, {recursive: true, force: true});
      if (proxy.asked.length) throw new Error(`Firefox made requests beyond the test's server:\n${proxy.asked.join('\n')}`);
    },
  };
}

async function launchChromium() {
  const browser = await launchBrowser();
  return {
    newPage: async () => chromiumPage(await browser.context.newPage()),
    close: () => browser.close(),
  };
}

// kind: 'chromium' or 'firefox'. Returns {newPage(), close()}.
export function launch(kind) {
  if (kind === 'firefox') {
    if (!fs.existsSync(kFirefox)) throw new Error(`${kFirefox} is missing: apt-get install firefox-esr (scripts/install-deps.sh)`);
    return launchFirefox();
  }
  return launchChromium();
}

const byTestId = (id) => `[data-testid="${id}"]`;

// What both pages share, written once over page.evaluate (the same call in both tools).
function common(raw) {
  return {
    raw,
    evaluate: (fn, arg) => raw.evaluate(fn, arg),
    text: (selector) => raw.evaluate((s) => document.querySelector(s)?.textContent ?? null, selector),
    attr: (selector, name) => raw.evaluate(([s, n]) => document.querySelector(s)?.getAttribute(n) ?? null, [selector, name]),
    count: (selector) => raw.evaluate((s) => document.querySelectorAll(s).length, selector),
    press: (key) => raw.keyboard.press(key),
    focus: (selector) => raw.focus(selector),
    screenshot: (file) => raw.screenshot({path: file, fullPage: true}),
    close: () => raw.close(),
  };
}

function chromiumPage(raw) {
  return {
    ...common(raw),
    goto: (url) => raw.goto(url),
    fill: (testid, value) => raw.locator(byTestId(testid)).fill(String(value)),
    click: (selector) => raw.locator(selector).click(),
    select: (testid, value) => raw.locator(byTestId(testid)).selectOption(value),
    check: (testid) => raw.locator(byTestId(testid)).check(),
    waitFor: (fn, arg, timeout) => raw.waitForFunction(fn, arg, {timeout}),
    // Console errors and warnings and uncaught page errors, into `lines`.
    watch(lines) {
      raw.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') lines.push(`[${m.type()}] ${m.text()}`); });
      raw.on('pageerror', (e) => lines.push(`[pageerror] ${e.message}`));
    },
  };
}

function firefoxPage(raw) {
  return {
    ...common(raw),
    goto: (url) => raw.goto(url),
    fill: (testid, value) => raw.locator(byTestId(testid)).fill(String(value)),
    click: (selector) => raw.locator(selector).click(),
    select: async (testid, value) => { await raw.select(byTestId(testid), value); },
    async check(testid) {
      if (!await raw.evaluate((s) => document.querySelector(s).checked, byTestId(testid))) await raw.click(byTestId(testid));
    },
    // Polled: requestAnimationFrame, puppeteer's default, is throttled in a page without focus.
    waitFor: (fn, arg, timeout) => raw.waitForFunction(fn, {timeout, polling: 50}, arg),
    watch(lines) {
      raw.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warn') lines.push(`[${m.type()}] ${m.text()}`); });
      raw.on('pageerror', (e) => lines.push(`[pageerror] ${e.message}`));
    },
  };
}
