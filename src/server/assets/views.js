/* The list views: overview, tasks, failed steps, templates and one
 * template, and the backoff explorer. Each reads one page of its list from
 * the API, never the whole table. */
'use strict';
(function () {
  const TK = window.TK;
  const { h } = TK;
  const PAGE = 50;

  const table = (cols, rows, empty) => rows.length
    ? h('table', { class: 'grid-table' }, h('thead', null, h('tr', null, cols.map((c) => h('th', null, c)))), h('tbody', null, rows))
    : h('p', { class: 'empty-list' }, empty);

  // A click on a row opens it, unless it was on a control or ended a text selection.
  function openRow(ev, href) {
    if (ev.target.closest('a, button, input, label')) return;
    if (String(window.getSelection ? window.getSelection() : '')) return;
    location.hash = href;
  }

  const errText = (t) => (t ? h('span', { class: 'error-text', title: t }, t) : h('span', { class: 'muted' }, '–'));
  const taskLink = (id) => h('a', { href: '#/task/' + encodeURIComponent(id) }, '#' + id);
  const templateLink = (t) => h('a', { href: '#/template/' + encodeURIComponent(t.namespace) + '/' + encodeURIComponent(t.name) + TK.qs({ version: t.version }), title: t.version ? 'version ' + t.version : null }, TK.templateName(t));

  // Counts by state as chips, in the given order, then any other state.
  function counts(byState, order) {
    const states = order.concat(Object.keys(byState || {}).filter((k) => !order.includes(k)));
    const total = states.reduce((a, k) => a + ((byState || {})[k] || 0), 0);
    const bar = h('div', { class: 'stackbar' }, states.filter((k) => (byState || {})[k]).map((k) =>
      h('span', { class: 'seg sw-st-' + k, style: { flexGrow: String(byState[k]) }, title: `${TK.stateLabel(k)}: ${byState[k]}` })));
    return h('div', null,
      h('div', { class: 'total' }, String(total)),
      total ? bar : h('div', { class: 'stackbar empty' }),
      h('ul', { class: 'counts' }, states.map((k) => {
        const n = (byState || {})[k] || 0;
        return h('li', { class: n ? '' : 'zero' }, h('span', { class: 'swatch sw-st-' + k }), h('span', { class: 'count-label' }, TK.stateLabel(k)), h('span', { class: 'count' }, String(n)));
      })));
  }

  // Run fetches side by side; each result or its error, never a throw.
  const settle = (ps) => Promise.all(ps.map((p) => p.then((v) => ({ v }), (e) => ({ e }))));

  /* ---- overview ---- */

  TK.views.overview = function () {
    const taskCounts = h('div'), stepCounts = h('div'), facts = h('div');
    const thr = h('div', { class: 'chart-box' }), late = h('div', { class: 'chart-box' });
    const recent = h('div'), err = h('div');
    const el = h('div', { class: 'page' },
      h('h1', null, 'Overview'), err,
      h('div', { class: 'cards3' },
        h('section', { class: 'card' }, h('h2', null, 'Tasks'), taskCounts),
        h('section', { class: 'card' }, h('h2', null, 'Steps'), stepCounts),
        h('section', { class: 'card' }, h('h2', null, 'Now'), facts)),
      h('div', { class: 'cards2' },
        h('section', { class: 'card' }, h('h2', null, 'Throughput, last hour'),
          TK.legend([['sw-oc-success', 'succeeded'], ['sw-oc-failure', 'failed'], ['sw-line src-retries', 'retries']]), thr),
        h('section', { class: 'card' }, h('h2', null, 'Retry lateness, last hour'),
          TK.legend([['sw-lateness', 'average'], ['sw-line src-latemax', 'maximum']]), late)),
      h('section', { class: 'card' }, h('h2', null, 'Latest failed steps ', h('a', { href: '#/failed', class: 'more' }, 'all failed →')), recent));
    const refresh = async function () {
      const [st, act, fail] = await settle([TK.api('/status'), TK.api('/activity?window=1h&bucket=1m'), TK.api('/steps?state=error&limit=5')]);
      const errs = [st, act, fail].filter((r) => r.e).map((r) => r.e.message);
      TK.swap(err, errs, () => h('div', null, errs.map((m) => h('div', { class: 'flash flash-error' }, m))));
      if (st.v) {
        if (st.v.now) TK.clockOffset = st.v.now - Date.now();
        TK.swap(taskCounts, st.v.tasks, () => counts(st.v.tasks, TK.TASK_STATES));
        TK.swap(stepCounts, st.v.steps, () => counts(st.v.steps, TK.STEP_STATES));
        TK.swap(facts, [st.v.ready_now, st.v.next_due_at, st.v.backend, st.v.counters, st.v.as_of], () => h('dl', { class: 'facts' },
          h('dt', null, 'ready to run'), h('dd', null, String(st.v.ready_now ?? '–')),
          h('dt', null, 'next retry due'), h('dd', null, TK.time(st.v.next_due_at)),
          h('dt', null, 'store'), h('dd', null, st.v.backend || '–'),
          st.v.as_of ? [h('dt', null, 'counted'), h('dd', null, TK.time(st.v.as_of))] : null,
          Object.keys(st.v.counters || {}).map((k) => [h('dt', null, k.replace(/_/g, ' ')), h('dd', null, String(st.v.counters[k]))])));
      }
      if (act.v) {
        TK.swap(thr, act.v, () => TK.throughputChart(act.v));
        TK.swap(late, act.v, () => TK.latenessChart(act.v));
      }
      if (fail.v) TK.swap(recent, fail.v.steps, () => failedTable(fail.v.steps, null));
    };
    return { el, refresh, title: 'Overview' };
  };

  /* ---- filters shared by tasks and failed ---- */

  const SINCE = [['', 'any time'], ['15m', 'last 15 minutes'], ['1h', 'last hour'], ['24h', 'last 24 hours'], ['7d', 'last 7 days']];

  function filterForm(route, q, withState) {
    const field = (label, input) => h('label', null, h('span', null, label), input);
    const state = withState ? h('select', { name: 'state' }, h('option', { value: '' }, 'any'),
      TK.TASK_STATES.map((st) => h('option', { value: st, selected: q.get('state') === st }, TK.stateLabel(st)))) : null;
    const since = h('select', { name: 'since' }, SINCE.map(([v, l]) => h('option', { value: v, selected: (q.get('since') || '') === v }, l)));
    if (q.get('since') && !SINCE.some(([v]) => v === q.get('since')))
      since.appendChild(h('option', { value: q.get('since'), selected: true }, q.get('since')));
    const tmpl = h('input', { name: 'template', list: 'template-names', placeholder: 'name or namespace/name', value: q.get('template') || '' });
    const text = h('input', { name: 'q', type: 'search', placeholder: 'text in the last error', value: q.get('q') || '' });
    const names = h('datalist', { id: 'template-names' });
    TK.api('/templates').then((list) => {
      for (const t of list || []) names.appendChild(h('option', { value: TK.templateName(t) }));
    }, () => {});
    return h('form', {
      class: 'filters',
      onsubmit: (ev) => {
        ev.preventDefault();
        const f = new FormData(ev.target);
        const o = {};
        for (const [k, v] of f.entries()) o[k] = String(v).trim();
        location.hash = '#/' + route + TK.qs(o);
      },
    },
    state ? field('state', state) : null, field('template', tmpl), field('created', since), field('error text', text), names,
    h('div', { class: 'filter-buttons' }, h('button', { type: 'submit', class: 'primary' }, 'Apply'),
      h('a', { class: 'button', href: '#/' + route }, 'Clear')));
  }

  function filtersOf(q, keys) {
    const o = {};
    for (const k of keys) if (q.get(k)) o[k] = q.get(k);
    return o;
  }

  /* ---- tasks ---- */

  function progress(t) {
    const pct = t.steps_total ? Math.round((100 * t.steps_done) / t.steps_total) : 0;
    return h('div', { class: 'progress', title: `${t.steps_done} of ${t.steps_total} steps done` + (t.steps_error ? `, ${t.steps_error} in error` : '') },
      h('div', { class: 'progress-bar' }, h('span', { class: 'progress-done', style: { width: pct + '%' } })),
      h('span', { class: 'num' }, `${t.steps_done}/${t.steps_total}`),
      t.steps_error ? h('span', { class: 'err-count' }, `${t.steps_error} err`) : null);
  }

  TK.views.tasks = function (params) {
    const q = params.q;
    const filters = filtersOf(q, ['state', 'template', 'since', 'q']);
    const list = h('div'), pager = h('div'), pagerTop = h('div');
    const el = h('div', { class: 'page' }, h('h1', null, 'Tasks'), filterForm('tasks', q, true), pagerTop, list, pager);
    const href = (cursor) => '#/tasks' + TK.qs(Object.assign({}, filters, { cursor }));
    const refresh = async function () {
      let page;
      try {
        page = await TK.api('/tasks' + TK.qs(Object.assign({ limit: PAGE, cursor: q.get('cursor') }, filters)));
      } catch (e) {
        TK.swap(list, { e: e.message }, () => TK.errorBox(e));
        throw e;
      }
      TK.swap(list, page.tasks, () => table(['task', 'template', 'state', 'steps', 'last error', 'next retry', 'created', 'updated'],
        page.tasks.map((t) => h('tr', { class: 'clickable', onclick: (ev) => openRow(ev, '#/task/' + encodeURIComponent(t.id)) },
          h('td', null, taskLink(t.id)),
          h('td', null, templateLink(t.template)),
          h('td', null, TK.badge(t.state)),
          h('td', null, progress(t)),
          h('td', { class: 'err' }, errText(t.last_error)),
          h('td', null, TK.time(t.next_run_at)),
          h('td', null, TK.time(t.created_at)),
          h('td', null, TK.time(t.updated_at)))),
        Object.keys(filters).length ? 'No task matches these filters.' : 'No tasks yet.'));
      TK.swap(pager, [page.next_cursor, q.get('cursor')], () => TK.pager(page.next_cursor, href, !q.get('cursor')));
      if (page.tasks.length > 15) TK.swap(pagerTop, [page.next_cursor, q.get('cursor')], () => TK.pager(page.next_cursor, href, !q.get('cursor')));
    };
    return { el, refresh, title: 'Tasks' };
  };

  /* ---- failed steps ---- */

  const stepKey = (r) => r.task + '\u0000' + r.step;

  // The failed steps' table; with `sel` (a Set of keys), a checkbox each.
  function failedTable(steps, sel, onChange) {
    const cols = (sel ? [''] : []).concat(['task', 'step', 'template', 'attempts', 'why', 'last error', 'failed']);
    return table(cols, steps.map((r) => h('tr', { class: sel && sel.has(stepKey(r)) ? 'selected' : null },
      sel ? h('td', null, h('input', { type: 'checkbox', checked: sel.has(stepKey(r)), 'aria-label': `select ${r.task} ${r.step}`,
        onchange: (ev) => { ev.target.checked ? sel.add(stepKey(r)) : sel.delete(stepKey(r)); ev.target.closest('tr').classList.toggle('selected', ev.target.checked); onChange(); } })) : null,
      h('td', null, taskLink(r.task)),
      h('td', null, h('strong', null, r.step)),
      h('td', null, templateLink(r.template)),
      h('td', { class: 'num' }, `${r.attempts}/${r.max_attempts}`),
      h('td', null, r.exhausted
        ? h('span', { class: 'tag tag-exhausted', title: 'it failed each of its attempts' }, 'attempts ran out')
        : h('span', { class: 'tag tag-permanent', title: 'a failure that is not retried' }, 'permanent failure')),
      h('td', { class: 'err' }, errText(r.last_error)),
      h('td', null, TK.time(r.updated_at)))), 'No failed steps. 🎉');
  }

  TK.views.failed = function (params) {
    const q = params.q;
    const filters = filtersOf(q, ['template', 'since', 'q']);
    const sel = new Set();
    let shown = [];
    const list = h('div'), pager = h('div'), msg = h('div', { class: 'msgs' });
    const count = h('span', { class: 'muted' });
    let refresh;
    const bulk = async (action) => {
      const steps = shown.filter((r) => sel.has(stepKey(r))).map((r) => ({ task: r.task, step: r.step }));
      if (!steps.length) return;
      try {
        const r = await TK.api('/actions/' + action, { method: 'POST', body: { steps } });
        const errs = (r.errors || []).map((e) => h('li', null, `task ${e.task} ${e.step || ''}: ${e.message}`));
        msg.replaceChildren(h('div', { class: 'flash ' + (r.failed ? 'flash-error' : 'flash-ok') },
          `${action === 'retry' ? 'Retried' : 'Resolved'} ${r.done} of ${r.matched}` + (r.failed ? `; ${r.failed} refused:` : '.'),
          errs.length ? h('ul', null, errs) : null));
        sel.clear();
        list.tkLast = null;
      } catch (e) {
        TK.flash(msg, 'error', `${action} failed: ${e.message}`);
      }
      updateCount();
      refresh();
    };
    const retryBtn = h('button', { class: 'primary', disabled: true, onclick: () => bulk('retry') }, 'Retry selected');
    const resolveBtn = h('button', { disabled: true, onclick: () => bulk('resolve') }, 'Resolve selected');
    const allBox = h('input', { type: 'checkbox', 'aria-label': 'select all on this page', onchange: (ev) => {
      for (const r of shown) ev.target.checked ? sel.add(stepKey(r)) : sel.delete(stepKey(r));
      list.tkLast = null;
      draw();
      updateCount();
    } });
    function updateCount() {
      const n = shown.filter((r) => sel.has(stepKey(r))).length;
      count.textContent = n ? `${n} selected` : 'select steps to act on several at once';
      retryBtn.disabled = !n;
      resolveBtn.disabled = !n;
      allBox.checked = n > 0 && n === shown.length;
    }
    function draw() {
      TK.swap(list, [shown, [...sel]], () => failedTable(shown, sel, updateCount));
    }
    const el = h('div', { class: 'page' }, h('h1', null, 'Failed steps'),
      h('p', { class: 'muted' }, 'Steps in error: their attempts ran out, or a failure was permanent. Retry gives a step fresh attempts; resolve marks it done by hand.'),
      filterForm('failed', q, false),
      h('div', { class: 'toolbar' }, h('label', { class: 'check' }, allBox, 'all on this page'), retryBtn, resolveBtn, count),
      msg, list, pager);
    const href = (cursor) => '#/failed' + TK.qs(Object.assign({}, filters, { cursor }));
    refresh = async function () {
      let page;
      try {
        page = await TK.api('/steps' + TK.qs(Object.assign({ state: 'error', limit: PAGE, cursor: q.get('cursor') }, filters)));
      } catch (e) {
        TK.swap(list, { e: e.message }, () => TK.errorBox(e));
        throw e;
      }
      shown = page.steps;
      // A selected step that left the page (retried elsewhere) is dropped.
      const keys = new Set(shown.map(stepKey));
      for (const k of [...sel]) if (!keys.has(k)) sel.delete(k);
      draw();
      updateCount();
      TK.swap(pager, [page.next_cursor, q.get('cursor')], () => TK.pager(page.next_cursor, href, !q.get('cursor')));
    };
    return { el, refresh, title: 'Failed steps' };
  };

  /* ---- templates ---- */

  TK.views.templates = function () {
    const list = h('div');
    const el = h('div', { class: 'page' }, h('h1', null, 'Templates'), list);
    const refresh = async function () {
      let ts;
      try {
        ts = await TK.api('/templates');
      } catch (e) {
        TK.swap(list, { e: e.message }, () => TK.errorBox(e));
        throw e;
      }
      TK.swap(list, ts, () => table(['template', 'version', 'steps', 'description', 'added'],
        (ts || []).map((t) => h('tr', null,
          h('td', null, templateLink(t)),
          h('td', null, t.version),
          h('td', { class: 'num' }, String(t.steps)),
          h('td', null, t.description || ''),
          h('td', null, TK.time(t.created_at)))), 'No templates yet: add one with tasker template add FILE.toml.'));
    };
    return { el, refresh, title: 'Templates' };
  };

  function timeoutText(st) {
    const hd = st.handler || {};
    const v = hd.timeout_ms !== undefined ? hd.timeout_ms : st.timeout !== undefined ? st.timeout : hd.timeout;
    if (v === undefined || v === null) return '';
    return typeof v === 'number' ? TK.fmtDur(v) : String(v);
  }

  function handlerText(hd) {
    if (!hd) return '';
    if (hd.kind === 'command' && Array.isArray(hd.argv)) return 'command: ' + hd.argv.join(' ');
    if (hd.kind === 'http') return 'http: ' + (hd.method || 'GET') + ' ' + (hd.url || '');
    if (hd.kind === 'builtin') return 'builtin: ' + (hd.name || '');
    return hd.kind + (hd.name ? ': ' + hd.name : '');
  }

  // Retry settings in words, the backoff profile linked to the explorer.
  function retryText(r) {
    if (!r || typeof r !== 'object') return '';
    const out = [];
    for (const k of Object.keys(r)) {
      const v = r[k];
      if (k === 'max_attempts') out.push(`${v} attempts`);
      else if (k === 'backoff') out.push(['backoff ', h('a', { href: '#/backoff' + TK.qs({ profile: v }) }, String(v))]);
      else if (k === 'retryable') out.push(v ? 'retryable' : 'not retried');
      else out.push(`${k.replace(/_/g, ' ')} ${typeof v === 'object' ? JSON.stringify(v) : v}`);
    }
    return out.map((x, i) => (i ? [' · ', x] : x));
  }

  TK.views.template = function (params) {
    const name = params.parts.map(decodeURIComponent).join('/');
    const version = params.q.get('version');
    const body = h('div');
    const el = h('div', { class: 'page' }, h('div', { class: 'crumbs' }, h('a', { href: '#/templates' }, 'Templates'), ' / ', name), body);
    const refresh = async function () {
      let t;
      try {
        t = await TK.api('/templates/' + params.parts.map((p) => encodeURIComponent(decodeURIComponent(p))).join('/') + TK.qs({ version }));
      } catch (e) {
        TK.swap(body, { e: e.message }, () => TK.errorBox(e));
        throw e;
      }
      const def = t.definition || {};
      const steps = Array.isArray(def.steps) ? def.steps : [];
      TK.swap(body, t, () => h('div', null,
        h('h1', null, TK.templateName(t), ' ', h('span', { class: 'muted' }, t.version)),
        t.description ? h('p', null, t.description) : null,
        def.retry ? h('p', null, h('span', { class: 'muted' }, 'Retry for every step: '), retryText(def.retry)) : null,
        h('div', { class: 'toolbar' }, h('a', { class: 'button', href: '#/tasks' + TK.qs({ template: TK.templateName(t) }) }, 'Its tasks'),
          h('a', { class: 'button', href: '#/failed' + TK.qs({ template: TK.templateName(t) }) }, 'Its failed steps')),
        steps.length ? h('section', { class: 'card' }, h('h2', null, 'Steps'), h('div', { class: 'dag-wrap' }, TK.dagSvg(steps)),
          table(['step', 'handler', 'depends on', 'retry (beyond the template’s)', 'timeout'], steps.map((st) => h('tr', null,
            h('td', null, h('strong', null, st.name)),
            h('td', { class: 'mono' }, handlerText(st.handler)),
            h('td', null, (st.depends_on || []).join(', ')),
            h('td', null, retryText(st.retry)),
            h('td', null, timeoutText(st)))), '')) : null,
        h('section', { class: 'card' }, h('h2', null, 'Definition'), h('pre', { class: 'json' }, JSON.stringify(def, null, 2)))));
    };
    return { el, refresh, title: name };
  };

  /* ---- backoff explorer ---- */

  const JITTERS = ['none', 'proportional', 'full', 'equal', 'decorrelated'];

  // A policy in words: what a reader checks first.
  function policyText(name, p) {
    const parts = [];
    if (Array.isArray(p.schedule_ms) && p.schedule_ms.length) parts.push('schedule ' + p.schedule_ms.map(TK.fmtDur).join(', '));
    if (p.base_ms !== undefined) parts.push('base ' + TK.fmtDur(p.base_ms));
    if (p.multiplier !== undefined) parts.push('×' + p.multiplier + ' per failure');
    if (p.max_delay_ms !== undefined) parts.push('cap ' + TK.fmtDur(p.max_delay_ms));
    if (p.min_delay_ms) parts.push('floor ' + TK.fmtDur(p.min_delay_ms));
    if (p.jitter) parts.push('jitter ' + p.jitter + (p.jitter === 'proportional' && p.jitter_fraction !== undefined ? ' ±' + Math.round(p.jitter_fraction * 100) + '%' : ''));
    if (p.max_server_delay_ms !== undefined) parts.push('server delays up to ' + TK.fmtDur(p.max_server_delay_ms));
    return [h('strong', null, name ? 'Profile ' + name + ': ' : 'Policy: '), parts.join(' · ')];
  }

  TK.views.backoff = function (params) {
    const q = params.q;
    const custom = q.get('mode') === 'custom';
    const field = (label, input) => h('label', null, h('span', null, label), input);
    const profile = h('select', { name: 'profile' }, h('option', { value: q.get('profile') || 'default' }, q.get('profile') || 'default'));
    // Empty fields keep the profile's values, shown as their placeholders.
    const base = h('input', { name: 'base', value: q.get('base') || '', size: 7 });
    const mult = h('input', { name: 'multiplier', value: q.get('multiplier') || '', size: 5 });
    const cap = h('input', { name: 'cap', value: q.get('cap') || '', size: 7 });
    const form = h('form', {
      class: 'filters',
      onsubmit: (ev) => {
        ev.preventDefault();
        const o = {};
        for (const [k, v] of new FormData(ev.target).entries()) o[k] = String(v).trim();
        location.hash = '#/backoff' + TK.qs(o);
      },
    },
    h('fieldset', { class: 'mode' },
      h('label', { class: 'check' }, h('input', { type: 'radio', name: 'mode', value: 'profile', checked: !custom }), 'a configured profile'),
      h('label', { class: 'check' }, h('input', { type: 'radio', name: 'mode', value: 'custom', checked: custom }), 'a policy of my own')),
    field('profile', profile),
    field('base', base),
    field('multiplier', mult),
    field('cap', cap),
    field('jitter', h('select', { name: 'jitter' }, h('option', { value: '' }, '(profile’s)'),
      JITTERS.map((j) => h('option', { value: j, selected: q.get('jitter') === j }, j)))),
    field('retries', h('input', { name: 'attempts', type: 'number', min: 1, max: 100, value: q.get('attempts') || '10', size: 4 })),
    field('scale', h('select', { name: 'scale' }, h('option', { value: '' }, 'linear'), h('option', { value: 'log', selected: q.get('scale') === 'log' }, 'logarithmic'))),
    h('div', { class: 'filter-buttons' }, h('button', { type: 'submit', class: 'primary' }, 'Plot')));
    const chart = h('div', { class: 'chart-box wide' }), rows = h('div'), err = h('div');
    const el = h('div', { class: 'page' }, h('h1', null, 'Backoff explorer'),
      h('p', { class: 'muted' }, 'The delay before each retry: the shaded band is where jitter puts it (min to max), the line its median, the dashed line the delay before jitter.'),
      form, err,
      h('section', { class: 'card' }, TK.legend([['sw-band', 'jitter band (min..max)'], ['sw-line src-median', 'median'], ['sw-line src-capped', 'before jitter']]), chart),
      h('section', { class: 'card' }, rows));
    const refresh = async function () {
      const p = { attempts: q.get('attempts') || 10, profile: q.get('profile') || null };
      if (custom) for (const k of ['base', 'multiplier', 'cap', 'jitter']) p[k] = q.get(k);
      let r;
      try {
        r = await TK.api('/backoff' + TK.qs(p));
      } catch (e) {
        TK.swap(err, e.message, () => TK.errorBox(e));
        return;
      }
      TK.swap(err, null, () => h('span'));
      if (Array.isArray(r.profiles) && profile.tkLast !== r.profiles.join()) {
        profile.tkLast = r.profiles.join();
        const want = q.get('profile') || r.profile || 'default';
        profile.replaceChildren(...r.profiles.map((n) => h('option', { value: n, selected: n === want }, n)));
      }
      const pol = r.policy || {};
      if (pol.base_ms !== undefined) base.setAttribute('placeholder', TK.fmtDur(pol.base_ms));
      if (pol.multiplier !== undefined) mult.setAttribute('placeholder', String(pol.multiplier));
      if (pol.max_delay_ms !== undefined) cap.setAttribute('placeholder', TK.fmtDur(pol.max_delay_ms));
      TK.swap(chart, r.delays, () => TK.backoffChart(r.delays, q.get('scale') === 'log'));
      TK.swap(rows, [r.delays, r.policy], () => h('div', null,
        r.policy ? h('p', { class: 'policy' }, policyText(r.profile, r.policy)) : null,
        table(['after failure', 'before jitter', 'min', 'median', 'max', 'total wait (median)'], (() => {
          let sum = 0;
          return r.delays.map((d) => {
            sum += d.median_ms;
            return h('tr', null, h('td', { class: 'num' }, '#' + d.attempt), h('td', { class: 'num' }, TK.fmtDur(d.capped_ms)),
              h('td', { class: 'num' }, TK.fmtDur(d.min_ms)), h('td', { class: 'num' }, TK.fmtDur(d.median_ms)),
              h('td', { class: 'num' }, TK.fmtDur(d.max_ms)), h('td', { class: 'num' }, TK.fmtDur(sum)));
          });
        })(), 'No delays.')));
    };
    return { el, refresh, title: 'Backoff explorer' };
  };

  TK.failedTable = failedTable;
})();
