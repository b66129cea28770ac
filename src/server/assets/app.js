/* The dashboard's shell: hash routes to views, the navigation, and the
 * refresh every few seconds (paused while the tab is hidden, or while the
 * reader has text selected, so nothing moves under the mouse). */
'use strict';
(function () {
  const TK = window.TK;
  const { h } = TK;
  const EVERY_MS = 4000;

  const NAV = [['overview', '#/', 'Overview'], ['tasks', '#/tasks', 'Tasks'], ['failed', '#/failed', 'Failed'],
    ['templates', '#/templates', 'Templates'], ['queues', '#/queues', 'Queues'], ['budgets', '#/budgets', 'Budgets'], ['backoff', '#/backoff', 'Backoff']];

  let current = null;   // {el, refresh, title}
  let busy = false;
  let paused = false;
  let lastOk = null;

  const main = h('main', { id: 'main' });
  const live = h('span', { class: 'live' });
  const pauseBtn = h('button', { class: 'small ghost', title: 'stop refreshing by itself', onclick: () => {
    paused = !paused;
    pauseBtn.textContent = paused ? 'Resume' : 'Pause';
    if (!paused) tick();
    showLive();
  } }, 'Pause');
  const nav = h('nav', null, NAV.map(([name, href, label]) => h('a', { href, 'data-view': name }, label)));

  function showLive(error) {
    live.className = 'live' + (error ? ' live-error' : paused ? ' live-paused' : '');
    live.replaceChildren(h('span', { class: 'dot' }),
      error ? 'not updated: ' + error
        : paused ? 'paused'
          : lastOk ? h('span', null, 'live · updated ', h('span', { title: TK.fmtAbs(lastOk) }, new Date(lastOk).toLocaleTimeString())) : 'loading…');
  }

  // '#/task/12?x=1' -> {view: 'task', parts: ['12'], q}
  function parseHash() {
    const raw = location.hash.replace(/^#\/?/, '');
    const [path, query] = raw.split('?');
    const parts = path.split('/').filter(Boolean);
    return { view: parts[0] || 'overview', parts: parts.slice(1), q: new URLSearchParams(query || '') };
  }

  async function tick() {
    if (!current || busy || paused || document.hidden) return;
    const sel = window.getSelection && window.getSelection();
    if (sel && !sel.isCollapsed && String(sel).length) return;
    busy = true;
    const mine = current;
    try {
      await mine.refresh();
      if (mine === current) { lastOk = Date.now(); showLive(); }
    } catch (e) {
      showLive(e.message);
    } finally {
      busy = false;
    }
    TK.tickTimes();
  }
  TK.refreshNow = tick;

  function route() {
    const p = parseHash();
    const make = TK.views[p.view];
    for (const a of nav.querySelectorAll('a'))
      a.classList.toggle('active', a.getAttribute('data-view') === p.view ||
        (p.view === 'task' && a.getAttribute('data-view') === 'tasks') ||
        (p.view === 'template' && a.getAttribute('data-view') === 'templates'));
    current = make ? make(p) : { el: h('div', { class: 'page' }, h('h1', null, 'Not found'), h('p', null, 'Nothing here: ', h('a', { href: '#/' }, 'go to the overview'), '.')), refresh: async () => {}, title: 'Not found' };
    document.title = current.title + ' · tasker';
    main.replaceChildren(current.el);
    window.scrollTo(0, 0);
    busy = false;
    tick();
  }

  function start() {
    document.body.replaceChildren(
      h('header', { class: 'top' },
        h('a', { class: 'brand', href: '#/' }, h('img', { class: 'logo', src: 'favicon.svg', alt: '', width: 26, height: 26 }), 'tasker'),
        nav, h('div', { class: 'top-right' }, live, pauseBtn)),
      main);
    showLive();
    window.addEventListener('hashchange', route);
    document.addEventListener('visibilitychange', () => { if (!document.hidden) tick(); });
    setInterval(tick, EVERY_MS);
    route();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
