// The console's one script: live updates, background notifications and @agent completion.
// Every page reads and posts without it.
//
// Live updates: one tab of the browser holds the only stream (a Web Lock, released when that
// tab goes, when another takes over) and passes each change to the other tabs over a
// BroadcastChannel: a browser opens at most six connections to a host, so a stream per tab
// would hang the seventh. What the stream sends is HTML the daemon rendered and sanitized; this
// script only places it.
//
// A tab that joins says where its page was rendered from ('hello'); the tab holding the stream
// answers it with the changes it passed on since then ('replay', from a bounded list of the
// latest), or with a resync when that list does not reach back so far, so a change made
// between a page's render and its joining is not missed.
'use strict';
(() => {
  const live = document.getElementById('live');
  const channel = 'BroadcastChannel' in window ? new BroadcastChannel('agentteam-console') : null;
  let leading = false;
  // Where the page was rendered from, in the person's feed: a stream this tab opens starts
  // there, so nothing between the render and the stream is missed.
  const rendered = document.getElementById('messages');
  let cursor = rendered && rendered.dataset.cursor ? Number(rendered.dataset.cursor) : null;
  const renderedAt = cursor;
  let state = 'connecting';
  // This tab's name on the channel, and whether the tab holding the stream answered its hello.
  const tab = Math.random().toString(36).slice(2) + Date.now().toString(36);
  let answered = false;
  // Held by the tab with the stream: the latest changes it passed on, every one after `recentFrom`.
  const RECENT = 500;
  const recent = [];
  let recentFrom = null;
  const waiting = [];

  function show(next) {
    state = next;
    if (!live) return;
    live.dataset.state = next;
    live.textContent = {
      connecting: 'Connecting to live updates…',
      live: 'Live',
      offline: 'Offline: reconnecting…',
    }[next] || next;
  }
  show('connecting');

  function banner(text) {
    const main = document.getElementById('main');
    if (!main) return;
    let note = document.getElementById('changed');
    if (!note) {
      note = document.createElement('p');
      note.id = 'changed';
      note.className = 'changed';
      note.setAttribute('role', 'status');
      main.insertBefore(note, main.children[1] || null);
    }
    note.textContent = '';
    note.append(text + ' ');
    const reload = document.createElement('a');
    reload.href = location.pathname + location.search;
    reload.textContent = 'Reload';
    note.append(reload);
  }

  function notify(title, body, tag) {
    if (!('Notification' in window) || Notification.permission !== 'granted' || !document.hidden) return;
    try {
      new Notification(String(title), { body: String(body || ''), tag: 'agentteam-' + tag });
    } catch (_) { /* a browser that allows notifications only from a worker */ }
  }

  function placeHtml(element, html, where) {
    const template = document.createElement('template');
    template.innerHTML = html;
    const node = template.content.firstElementChild;
    if (!node) return;
    if (where === 'replace') element.replaceWith(node);
    else if (where === 'before') element.before(node);
    else element.append(node);
  }

  // The changes this tab placed, by seq (the latest 1000): a replay repeats what a tab may have
  // had live already, and a change's badge or notification counts once.
  const handled = new Set();
  function handle(change) {
    if (change.seq) {
      if (handled.has(change.seq)) return;
      handled.add(change.seq);
      if (handled.size > 1000) handled.delete(handled.values().next().value);
    }
    if (change.seq) cursor = Math.max(cursor || 0, change.seq);
    const list = document.getElementById('messages');
    const here = list && list.dataset.target === change.target;
    if (change.kind === 'message') {
      if (here && list.dataset.live === 'true' && !document.getElementById('m-' + change.id)) {
        placeHtml(list, change.html, 'append');
        const empty = document.querySelector('.empty');
        if (empty) empty.remove();
      }
      if (!change.mine) {
        if (!here) {
          for (const row of document.querySelectorAll('li[data-target]')) {
            if (row.dataset.target !== change.target) continue;
            const badge = row.querySelector('.unread');
            const count = Number(badge.dataset.unread || 0) + 1;
            badge.dataset.unread = String(count);
            badge.textContent = count + ' unread';
          }
        }
        notify(change.title, change.body, change.seq);
      }
    } else if (change.kind === 'reaction') {
      const old = document.getElementById('m-' + change.id);
      if (old) {
        // The message comes back without its deliveries' states: they are kept.
        const kept = Array.from(old.querySelectorAll('.delivery'));
        placeHtml(old, change.html, 'replace');
        const fresh = document.getElementById('m-' + change.id);
        for (const state of kept) fresh.querySelector('.reactions').before(state);
      }
    } else if (change.kind === 'delivery') {
      const old = document.getElementById('d-' + change.id);
      const message = document.getElementById('m-' + change.messageId);
      if (old) placeHtml(old, change.html, 'replace');
      else if (message) placeHtml(message.querySelector('.reactions'), change.html, 'before');
    } else if (change.kind === 'approval') {
      if (change.status === 'pending') notify(change.title, change.body, change.seq);
      if (location.pathname === '/approvals') banner('Approvals changed.');
    } else if (change.kind === 'task') {
      if (location.pathname.endsWith('/work')) banner('Tasks changed.');
    } else if (change.kind === 'resync') {
      banner('Some changes were missed while offline.');
    }
  }

  // Answers a joining tab rendered at `from`: what it may have missed, or a resync.
  function answer(to, from) {
    if (!channel) return;
    let changes = [];
    if (from !== null && from !== undefined && recentFrom !== null && from < recentFrom) {
      changes = [{ kind: 'resync' }];
    } else if (from !== null && from !== undefined) {
      changes = recent.filter((change) => change.seq > from);
    }
    channel.postMessage({ type: 'replay', to, changes, state, cursor });
  }

  function lead() {
    leading = true;
    return new Promise(() => {
      const source = new EventSource(cursor === null ? '/live' : '/live?after=' + cursor);
      const announce = (next) => {
        show(next);
        if (channel) channel.postMessage({ type: 'status', state: next, cursor });
      };
      source.addEventListener('ready', (e) => {
        const data = JSON.parse(e.data);
        if (cursor === null) cursor = data.cursor;
        recentFrom = cursor;
        announce('live');
        for (const hello of waiting.splice(0)) answer(hello.tab, hello.cursor);
      });
      source.addEventListener('change', (e) => {
        if (state !== 'live') announce('live');
        const change = JSON.parse(e.data);
        handle(change);
        if (change.seq) {
          recent.push(change);
          if (recent.length > RECENT) recentFrom = recent.shift().seq;
        }
        if (channel) channel.postMessage({ type: 'change', change });
      });
      source.addEventListener('cursor', (e) => {
        if (state !== 'live') announce('live');
        const seen = Number(e.lastEventId);
        if (seen > (cursor || 0)) cursor = seen;
        if (channel) channel.postMessage({ type: 'cursor', cursor });
      });
      source.addEventListener('resync', () => {
        // What came before is not known to be complete any more.
        recent.length = 0;
        recentFrom = cursor;
        handle({ kind: 'resync' });
        if (channel) channel.postMessage({ type: 'change', change: { kind: 'resync' } });
      });
      source.addEventListener('offline', () => announce('offline'));
      source.addEventListener('open', () => { if (state !== 'live' && cursor !== null) announce('live'); });
      source.addEventListener('error', () => announce('offline'));
    });
  }

  if (channel) {
    channel.onmessage = (e) => {
      const message = e.data || {};
      if (message.type === 'change') handle(message.change);
      else if (message.type === 'status') {
        if (leading) return;
        show(message.state);
        cursor = message.cursor;
        // A tab took the stream before it heard this tab's hello: say it again.
        if (!answered) channel.postMessage({ type: 'hello', tab, cursor: renderedAt });
      } else if (message.type === 'cursor') { if (!leading) cursor = message.cursor; }
      else if (message.type === 'hello' && leading) {
        if (recentFrom === null) { if (waiting.length < 64) waiting.push(message); }
        else answer(message.tab, message.cursor);
      } else if (message.type === 'replay' && message.to === tab && !leading && !answered) {
        answered = true;
        for (const change of message.changes || []) handle(change);
        show(message.state);
      }
    };
  }
  if (live) {
    if (navigator.locks && channel) {
      navigator.locks.request('agentteam-console-live', lead);
      channel.postMessage({ type: 'hello', tab, cursor: renderedAt });
    } else {
      lead();
    }
  }

  // Notifications are asked for, never assumed.
  const ask = document.getElementById('notify');
  if (ask && 'Notification' in window && Notification.permission === 'default') {
    ask.hidden = false;
    ask.addEventListener('click', async () => {
      const answer = await Notification.requestPermission();
      if (answer !== 'default') ask.hidden = true;
    });
  }

  // The composer: Ctrl+Enter posts; @ completes an agent's handle.
  const content = document.getElementById('content');
  const box = document.getElementById('mentions');
  if (content && box) {
    const handles = (content.dataset.handles || '').split(' ').filter(Boolean);
    let options = [];
    let active = -1;
    content.setAttribute('aria-autocomplete', 'list');
    content.setAttribute('aria-controls', 'mentions');
    const close = () => {
      box.hidden = true;
      box.textContent = '';
      options = [];
      active = -1;
      content.removeAttribute('aria-activedescendant');
    };
    const mark = () => {
      options.forEach((option, i) => option.setAttribute('aria-selected', String(i === active)));
      if (active >= 0) content.setAttribute('aria-activedescendant', options[active].id);
    };
    const typed = () => /(^|\s)@([a-z0-9-]*)$/.exec(content.value.slice(0, content.selectionStart));
    const choose = (handle) => {
      const match = typed();
      if (!match) return close();
      const start = content.selectionStart - match[2].length;
      content.setRangeText(handle + ' ', start, content.selectionStart, 'end');
      close();
      content.focus();
    };
    content.addEventListener('input', () => {
      const match = typed();
      const found = match ? handles.filter((h) => h.startsWith(match[2])).slice(0, 8) : [];
      if (!found.length) return close();
      box.textContent = '';
      options = found.map((handle, i) => {
        const option = document.createElement('li');
        option.id = 'mention-' + i;
        option.setAttribute('role', 'option');
        option.textContent = '@' + handle;
        option.addEventListener('mousedown', (e) => { e.preventDefault(); choose(handle); });
        box.append(option);
        return option;
      });
      active = 0;
      box.hidden = false;
      mark();
    });
    content.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        content.form.requestSubmit();
        return;
      }
      if (box.hidden || !options.length) return;
      if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
        e.preventDefault();
        active = (active + (e.key === 'ArrowDown' ? 1 : options.length - 1)) % options.length;
        mark();
      } else if (e.key === 'Enter' || e.key === 'Tab') {
        e.preventDefault();
        choose(options[active].textContent.slice(1));
      } else if (e.key === 'Escape') {
        e.preventDefault();
        close();
      }
    });
    content.addEventListener('blur', () => setTimeout(close, 150));
  }
})();
