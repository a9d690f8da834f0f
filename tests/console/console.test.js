// The console in a real browser: Debian's Chromium driven by playwright-core, against the real
// daemon and server that tests/it/console.rs started and filled (CONSOLE_FIXTURE). Every login
// goes the way a person's does: `agentteam open` writes an owner-only page, the browser opens it.
// Run by `cargo test` (console::a_person_reads_answers_and_decides_in_a_real_browser), which
// then checks what the browser did as the runtime sees it.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { chromium } = require('playwright-core');

const fixture = JSON.parse(process.env.CONSOLE_FIXTURE);
const kept = JSON.parse(fs.readFileSync(path.join(fixture.stateDir, 'console.json'), 'utf8'));
const origin = `http://${kept.name}:${kept.port}`;
const axeSource = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
let browser;

before(async () => {
  browser = await chromium.launch({ executablePath: fixture.chromium });
});
after(async () => {
  await browser?.close();
});

function agentteam(command, ...args) {
  return execFileSync(fixture.bin, [command, '--state-dir', fixture.stateDir, ...args], {
    encoding: 'utf8',
    env: { ...process.env, AGENTTEAM_NO_START: '1' },
  });
}

/** Every dialog, every request to another host, on `page`. */
function watch(page) {
  page.dialogs = [];
  page.foreign = [];
  page.on('dialog', (dialog) => {
    page.dialogs.push(dialog.message());
    dialog.dismiss().catch(() => {});
  });
  page.on('request', (request) => {
    const url = new URL(request.url());
    if (url.protocol !== 'file:' && url.origin !== origin) page.foreign.push(request.url());
  });
  return page;
}

/** A new browser context signed in through `agentteam open`'s page, and its first page. */
async function signIn(options = {}) {
  const opened = JSON.parse(agentteam('open', '--no-browser', '--json'));
  assert.strictEqual(opened.url, origin + '/');
  const context = await browser.newContext(options);
  const page = watch(await context.newPage());
  await page.goto('file://' + opened.loginFile);
  if (options.javaScriptEnabled === false) {
    // The page's own script posts the code; with scripts off, its button does.
    await page.getByRole('button', { name: 'Open the AgentTeam console' }).click();
  }
  await page.waitForURL(origin + '/');
  return { context, page, opened };
}

async function isLive(page) {
  await page.locator('#live').filter({ hasText: /^Live$/ }).waitFor();
}

/** axe-core on the page: no serious or critical violation. */
async function accessible(page, name) {
  await page.evaluate(axeSource);
  const { violations } = await page.evaluate(() => axe.run());
  const bad = violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.impact} ${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  assert.deepStrictEqual(bad, [], `${name}: axe-core found ${bad.join('; ')}`);
}

/** Presses Tab until the focused element is `selector` (keyboard only), at most 300 times. */
async function tabTo(page, selector) {
  for (let i = 0; i < 300; i++) {
    await page.keyboard.press('Tab');
    if (await page.evaluate((s) => document.activeElement?.matches(s), selector)) return;
  }
  assert.fail(`Tab never reached ${selector}`);
}

const conversation = (target) => `/c/${encodeURIComponent(target)}`;

test('every page reads, passes axe-core, and is saved as a screenshot', async () => {
  const { context, page } = await signIn();
  const pages = [
    ['conversations', '/', '#general'],
    ['conversation', conversation(fixture.general), 'release notes'],
    ['thread', conversation(fixture.thread), 'the release branch is cut'],
    ['work', conversation(fixture.thread) + '/work', 'Write the release notes'],
    ['approvals', '/approvals', 'Deploy to production'],
    ['runtimes', '/runtimes', 'builder'],
    ['audit', '/audit', 'message_send'],
    ['costs', '/costs', 'Fixed cost per request'],
  ];
  for (const [name, url, shows] of pages) {
    await page.goto(origin + url);
    await isLive(page);
    await page.getByText(shows).first().waitFor();
    await accessible(page, name);
    await page.screenshot({ path: path.join(fixture.screenshots, `${name}.png`), fullPage: true });
  }
  // The costs chart draws the recorded session's fixed and carried tokens.
  await page.goto(origin + '/costs');
  assert.ok(await page.locator('svg.chart rect.carried').count() >= 2);
  await page.getByRole('cell', { name: 'ses-console' }).waitFor();
  // Markdown is rendered; the review's too.
  await page.goto(origin + conversation(fixture.general));
  assert.strictEqual(await page.locator('.text strong', { hasText: 'release notes' }).count(), 1);
  await page.goto(origin + conversation(fixture.thread) + '/work');
  assert.strictEqual(await page.locator('.text em', { hasText: 'good' }).count(), 1);
  // The runtime's row: its agent, program, driver and credential.
  await page.goto(origin + '/runtimes');
  const row = page.locator(`#r-${fixture.runId}`);
  await assert.doesNotReject(row.getByText('builder').first().waitFor());
  assert.match(await row.textContent(), /^builder\s*sh\s*generic\s*none.*UTC.*UTC/s);
  assert.deepStrictEqual(page.dialogs, []);
  assert.deepStrictEqual(page.foreign, []);
  await context.close();
});

test('what an agent posts runs nothing and loads nothing; attachments only download', async () => {
  const { context, page } = await signIn();
  await page.goto(origin + conversation(fixture.general));
  await isLive(page);
  const found = await page.evaluate(() => ({
    owned: window.__owned,
    active: document.querySelectorAll(
      '#messages script, #messages img, #messages svg, #messages iframe, #messages object, [onerror], [onload]',
    ).length,
    hrefs: [...document.querySelectorAll('#messages .text a')].map((a) => [a.getAttribute('href'), a.rel]),
    texts: [...document.querySelectorAll('#messages .text')].map((t) => t.textContent),
  }));
  assert.strictEqual(found.owned, undefined);
  assert.strictEqual(found.active, 0);
  // A link to this machine (the tracker image's, on loopback) is shown as its text only.
  assert.deepStrictEqual(found.hrefs, [['https://example.com/docs', 'noopener noreferrer nofollow']]);
  assert.ok(found.texts.some((t) => t.includes('image: tracker')), found.texts);
  // The hostile text is shown as text.
  assert.ok(found.texts.some((t) => t.includes("<script>window.__owned = 'script'</script>")), found.texts);
  assert.ok(found.texts.some((t) => t.includes('click me')), found.texts);
  for (const name of ['page.html', 'image.svg']) {
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('link', { name }).click(),
    ]);
    assert.strictEqual(download.suggestedFilename(), name);
    assert.strictEqual(page.url(), origin + conversation(fixture.general));
  }
  assert.strictEqual(await page.evaluate(() => window.__owned), undefined);
  assert.deepStrictEqual(page.dialogs, []);
  assert.deepStrictEqual(page.foreign, [], 'nothing remote loads by itself');
  await context.close();
});

test('a message posted with the keyboard arrives live in eight other tabs', async () => {
  const { context, page } = await signIn();
  const tabs = [page];
  for (let i = 0; i < 8; i++) tabs.push(watch(await context.newPage()));
  for (const tab of tabs) {
    await tab.goto(origin + conversation(fixture.general));
  }
  for (const tab of tabs) await isLive(tab);
  // Keyboard only: to the composer, `@bu` completed to `@builder`, then to Post.
  await tabTo(page, '#content');
  await page.keyboard.type('@bu');
  await page.getByRole('option', { name: '@builder' }).waitFor();
  await page.keyboard.press('Enter');
  assert.strictEqual(await page.inputValue('#content'), '@builder ');
  await page.keyboard.type('typed without a mouse');
  await page.keyboard.press('Tab');
  assert.strictEqual(await page.evaluate(() => document.activeElement.textContent), 'Post');
  await Promise.all([page.waitForURL(/#m-msg_/), page.keyboard.press('Enter')]);
  for (const tab of tabs.slice(1)) {
    await tab.locator('#messages .text', { hasText: '@builder typed without a mouse' }).waitFor();
    // What became of it arrives live too: builder has no recipe, so its delivery waits.
    await tab
      .locator('#messages li.message', { hasText: '@builder typed without a mouse' })
      .locator('.delivery[data-state="pending"]', { hasText: 'builder: waiting for the daemon that hosts it' })
      .waitFor();
  }
  await page.locator('#messages .text', { hasText: '@builder typed without a mouse' }).waitFor();
  // One stream serves the browser, however many tabs.
  for (const tab of tabs) assert.deepStrictEqual(tab.foreign, []);
  await context.close();
});

test('a tab gets what changed between its render and its joining the tab that holds the stream', async () => {
  const { context, page } = await signIn();
  await page.goto(origin + conversation(fixture.general));
  await isLive(page);
  // Another tab, its page rendered but its script held back: it has not joined yet.
  const late = watch(await context.newPage());
  let release;
  const held = new Promise((resolve) => { release = resolve; });
  await late.route('**/static/console.js', async (route) => { await held; await route.continue(); });
  await late.goto(origin + conversation(fixture.general), { waitUntil: 'commit' });
  await late.locator('#messages').waitFor({ state: 'attached' });
  // A change in between, from outside the browser: the stream's tab places it.
  agentteam('post', fixture.general, 'posted while a tab was joining');
  await page.locator('#messages .text', { hasText: 'posted while a tab was joining' }).waitFor();
  // Joined, the late tab is handed it.
  release();
  await isLive(late);
  await late.locator('#messages .text', { hasText: 'posted while a tab was joining' }).waitFor();
  assert.strictEqual(await late.locator('#changed').count(), 0);

  // A tab rendered before the stream's tab began (it reloaded) cannot be handed what it missed:
  // it says so, with a link to reload.
  const stale = watch(await context.newPage());
  let release2;
  const held2 = new Promise((resolve) => { release2 = resolve; });
  await stale.route('**/static/console.js', async (route) => { await held2; await route.continue(); });
  await stale.goto(origin + conversation(fixture.general), { waitUntil: 'commit' });
  await stale.locator('#messages').waitFor({ state: 'attached' });
  await late.close();
  agentteam('post', fixture.general, 'posted before the stream was taken over');
  await page.reload();
  await isLive(page);
  await page.locator('#messages .text', { hasText: 'posted before the stream was taken over' }).waitFor();
  release2();
  await stale.locator('#changed', { hasText: 'Some changes were missed' }).waitFor();
  for (const tab of [page, late, stale]) assert.deepStrictEqual(tab.foreign, []);
  await context.close();
});

test('an approval decided with the keyboard; a background tab is notified of a new one', async () => {
  const { context, page } = await signIn();
  await context.addInitScript(() => {
    // What the person granted lasts across the tab's pages, as a browser keeps it.
    let permission = sessionStorage.getItem('notifications') || 'default';
    window.__notes = [];
    window.Notification = class {
      constructor(title, options) {
        window.__notes.push({ title, body: options && options.body });
      }
      static get permission() {
        return permission;
      }
      static requestPermission() {
        permission = 'granted';
        sessionStorage.setItem('notifications', permission);
        window.__asked = true;
        return Promise.resolve(permission);
      }
    };
    Object.defineProperty(Document.prototype, 'hidden', { get: () => true });
  });
  await page.goto(origin + '/approvals');
  await isLive(page);
  await accessible(page, 'approvals');
  // Asked for, not assumed.
  const ask = page.getByRole('button', { name: 'Notify me in the background' });
  await ask.waitFor();
  await ask.click();
  await ask.waitFor({ state: 'hidden' });
  assert.strictEqual(await page.evaluate(() => window.__asked), true);

  await tabTo(page, `#c-${fixture.approvalId}`);
  await page.keyboard.type('ship it, keyboard only');
  await page.keyboard.press('Tab');
  assert.strictEqual(await page.evaluate(() => document.activeElement.textContent), 'Approve');
  await Promise.all([page.waitForURL(/\/approvals#a-/), page.keyboard.press('Enter')]);
  await page.locator(`tr#a-${fixture.approvalId}`, { hasText: 'approved' }).waitFor();
  await isLive(page);

  // A runtime asks for another: the hidden tab raises a notification.
  agentteam('run', '--agent', 'builder', '--', fixture.bin, 'exec', 'approval', 'request',
    '{"title":"Rotate the keys"}');
  await page.waitForFunction(() => window.__notes.some((n) => n.body === 'Rotate the keys'));
  await page.getByText('Approvals changed.').waitFor();
  await context.close();
});

test('a page on another loopback port gets no cookie, reads nothing and posts nothing', async () => {
  const seen = [];
  const evil = http.createServer((request, response) => {
    seen.push(request.headers.cookie || '');
    response.setHeader('content-type', 'text/html');
    response.end(`<!doctype html><title>evil</title>
<form id="f" method="post" action="${origin}${conversation(fixture.general)}/post">
<input name="content" value="forged from another port"><input name="csrf" value="guess"></form>
<script>
fetch(${JSON.stringify(origin + '/')}, { credentials: 'include' })
  .then((r) => r.text()).then((t) => { document.title = 'read ' + t.length; })
  .catch(() => { document.title = 'blocked'; });
fetch(${JSON.stringify(origin + conversation(fixture.general) + '/post')}, { method: 'POST',
  mode: 'no-cors', credentials: 'include',
  body: new URLSearchParams({ content: 'forged without cors', csrf: 'guess' }) }).catch(() => {});
</script>`);
  });
  await new Promise((resolve) => evil.listen(0, '127.0.0.1', resolve));
  const port = evil.address().port;
  try {
    const { context, page } = await signIn();
    await isLive(page);
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`]) {
      const tab = await context.newPage();
      await tab.goto(`http://${host}/`);
      await tab.waitForFunction(() => document.title === 'blocked');
      await Promise.all([
        tab.waitForURL(`${origin}/**`),
        tab.evaluate(() => document.getElementById('f').submit()),
      ]);
      const refused = await tab.locator('h1').textContent();
      assert.ok(['Refused', 'Signed out'].includes(refused), refused);
    }
    assert.ok(seen.length >= 2);
    assert.ok(seen.every((cookie) => !cookie.includes('agentteam_console')), seen);
    // The console still shows nothing forged.
    await page.goto(origin + conversation(fixture.general));
    assert.strictEqual(await page.getByText('forged').count(), 0);
    await context.close();
  } finally {
    evil.close();
  }
});

test('a login page signs in once', async () => {
  const opened = JSON.parse(agentteam('open', '--no-browser', '--json'));
  const copy = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'console-login-')), 'copy.html');
  fs.copyFileSync(opened.loginFile, copy);
  const first = await browser.newContext();
  const page = await first.newPage();
  await page.goto('file://' + opened.loginFile);
  await page.waitForURL(origin + '/');
  await page.getByRole('heading', { name: 'Conversations' }).waitFor();
  const again = await browser.newContext();
  const replay = await again.newPage();
  await replay.goto('file://' + copy);
  await replay.getByRole('heading', { name: 'This login has expired' }).waitFor();
  assert.deepStrictEqual(await again.cookies(), []);
  await replay.goto(origin + '/');
  await replay.getByRole('heading', { name: 'Signed out' }).waitFor();
  await first.close();
  await again.close();
});

test('with scripts off, a person reads and posts', async () => {
  const { context, page } = await signIn({ javaScriptEnabled: false });
  await page.goto(origin + conversation(fixture.general));
  await page.getByText('ready to ship?').waitFor();
  assert.match(await page.locator('#live').textContent(), /need scripts/);
  await page.fill('#content', 'posted with scripts off');
  await Promise.all([page.waitForURL(/#m-msg_/), page.getByRole('button', { name: 'Post' }).click()]);
  await page.locator('#messages .text', { hasText: 'posted with scripts off' }).waitFor();
  await context.close();
});

test('a runtime is stopped from its page', async () => {
  const { context, page } = await signIn();
  await page.goto(origin + '/runtimes');
  await Promise.all([
    page.waitForURL(origin + '/runtimes'),
    page.locator(`#r-${fixture.runId}`).getByRole('button', { name: /^Stop builder/ }).click(),
  ]);
  await page.getByText('No runtime runs now').waitFor();
  await context.close();
});

test('a person mentions an agent in a thread: "answering" shows, then its reply, live; a stopped run is asked again', async () => {
  const { context, page } = await signIn();
  await page.goto(origin + conversation(fixture.thread));
  await isLive(page);
  await page.fill('#content', '@reviewer are the release notes ready?');
  await Promise.all([page.waitForURL(/#m-msg_/), page.getByRole('button', { name: 'Post' }).click()]);
  await isLive(page);
  // The agent's run started: its state under the person's message, before any reply.
  const asked = page.locator('#messages li.message', { hasText: '@reviewer are the release notes ready?' });
  await asked.locator('.delivery[data-state="started"]', { hasText: 'reviewer is answering…' }).waitFor();
  assert.strictEqual(await page.locator('#messages .text', { hasText: 'the notes are ready' }).count(), 0);
  await page.screenshot({ path: path.join(fixture.screenshots, 'answering.png'), fullPage: true });
  // Released, the stand-in runtime answers on the thread it was handed.
  fs.writeFileSync(fixture.go, 'go\n');
  await page.locator('#messages .text', { hasText: 'the notes are ready' }).waitFor();
  await asked.locator('.delivery[data-state="answered"]', { hasText: 'reviewer answered' }).waitFor();

  // A run the person stops does not answer: the message says so, and asks again with a button.
  await page.fill('#content', '@reviewer and the changelog?');
  await Promise.all([page.waitForURL(/#m-msg_/), page.getByRole('button', { name: 'Post' }).click()]);
  await isLive(page);
  const again = page.locator('#messages li.message', { hasText: '@reviewer and the changelog?' });
  await again.locator('.delivery[data-state="started"]').waitFor();
  // The delivery is started on the server before its runtime is: the Runtimes page lists the
  // run once it is spawned (the page is not live; it is reloaded until then, for at most 30 s).
  const runtimes = watch(await context.newPage());
  const stop = runtimes.getByRole('button', { name: /^Stop reviewer/ });
  const until = Date.now() + 30000;
  await runtimes.goto(origin + '/runtimes');
  while ((await stop.count()) === 0 && Date.now() < until) await runtimes.reload();
  await Promise.all([runtimes.waitForURL(origin + '/runtimes'), stop.click()]);
  await again.locator('.delivery[data-state="failed"]', { hasText: 'reviewer failed' }).waitFor();
  const retryForm = again.locator('form[action$="/retry"]');
  const sent = await retryForm.evaluate((f) => ({
    action: f.action,
    body: new URLSearchParams(new FormData(f)).toString(),
  }));
  await Promise.all([
    page.waitForURL(/#m-msg_/),
    again.getByRole('button', { name: 'Ask reviewer again' }).click(),
  ]);
  await isLive(page);
  await again.locator('.delivery[data-state="started"]').waitFor();
  // The same button sent again (a double-click) asks once: it is answered as the first was.
  const twice = await page.evaluate(async ({ action, body }) => {
    const answer = await fetch(action, {
      method: 'POST',
      body,
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    });
    return answer.status;
  }, sent);
  assert.strictEqual(twice, 200);
  fs.writeFileSync(fixture.go, 'go\n');
  await again.locator('.delivery[data-state="answered"]', { hasText: 'reviewer answered' }).waitFor();
  assert.deepStrictEqual(page.foreign, []);
  assert.deepStrictEqual(runtimes.foreign, []);
  await context.close();
});
