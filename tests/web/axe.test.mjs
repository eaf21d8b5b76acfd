// Accessibility: axe-core (node_modules/axe-core, the rules WCAG 2.x A and AA and axe's best
// practices) finds no violation on the page with a model loaded, a text generated and a token
// picked and an attribution graph open with a node pinned and a group of nodes drawn as one
// (tests/web/fixtures/graph-capital.json), at desktop width and at phone width (390 x 844, where
// wide heat maps and tables scroll and so must be reachable by keyboard).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {kRoot, launchBrowser, serveSite, watchConsole} from './browser.mjs';
import {generate, makeModels, modelDir} from './fixtures.mjs';

const kSite = path.join(kRoot, 'build/site');
const kAxe = path.join(kRoot, 'node_modules/axe-core/axe.min.js');
const kTimeout = 60_000;
const skip = (!fs.existsSync(path.join(kSite, 'index.html')) && 'build/site not built') ||
             (!fs.existsSync(kAxe) && 'axe-core not installed (npm ci)');

// Each violation in a line a person can act on: the rule, its impact and the elements.
const describeViolations = (violations) => violations.map((v) =>
  `${v.id} (${v.impact}): ${v.help}\n` + v.nodes.map((n) => `    ${n.target.join(' ')}`).join('\n')).join('\n');

describe('accessibility (axe-core)', {skip}, () => {
  let server, browser, page;
  const consoleLines = [];

  before(async () => {
    makeModels('axe');
    server = await serveSite({site: kSite, models: modelDir('axe')});
    browser = await launchBrowser();
    page = await browser.context.newPage();
    consoleLines.push(...watchConsole(page));
    await page.goto(server.url + '?model=models/tiny-q8_0.gguf');
    await page.waitForFunction(() => document.querySelector('[data-testid=progress]').dataset.source ||
                                     !document.querySelector('[data-testid=error]').hidden, null, {timeout: kTimeout});
    await generate(page);
    await page.waitForSelector('[data-testid=probs] li', {timeout: kTimeout});
    await page.getByTestId('graph-open-file').setInputFiles(path.join(kRoot, 'tests/web/fixtures/graph-capital.json'));
    // A group of two nodes drawn as one (its list item and buttons), and a third node picked.
    for (const id of ['2_4321_4', '5_1500_4', '8_300_5']) {
      await page.locator(`[data-testid=graph-view] [data-node-id="${id}"]`).click();
      await page.getByTestId('graph-group-add').click();
      if (id === '5_1500_4') {
        await page.getByTestId('graph-group-name').fill('say Paris');
        await page.getByTestId('graph-group-make').click();
      }
    }
    await page.locator('[data-testid=graph-view] [data-node-id="9_12345_5"]').click();
    await page.addScriptTag({path: kAxe});
  });

  after(async () => {
    await browser?.close();
    await server?.close();
    if (consoleLines.length) console.log(consoleLines.join('\n'));
  });

  for (const [name, viewport] of [['desktop', {width: 1280, height: 900}], ['phone', {width: 390, height: 844}]]) {
    test(`no violations at ${name} width (${viewport.width} x ${viewport.height})`, async () => {
      await page.setViewportSize(viewport);
      await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
      const violations = await page.evaluate(async () => (await window.axe.run(document)).violations.map((v) => ({
        id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => ({target: n.target})),
      })));
      assert.equal(violations.length, 0, describeViolations(violations));
    });
  }
});
