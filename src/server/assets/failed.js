/* The failed steps: filters, one page at a time, bulk retry and resolve
 * of the ticked ones, or retry of all that the filters match. */
'use strict';
(function () {
  const TK = window.TK;
  const { h, filterForm, filtersOf, stepKey, failedTable } = TK;

  const MAX_TASKS = 1000;

  // The body of "retry all matching": the filters, and "all" only when
  // there are none (the user chose every task; the server refuses an
  // empty filter without it).
  TK.matchingBody = function (filters, max) {
    const body = { filter: Object.assign({}, filters), max };
    if (!Object.keys(body.filter).length) body.all = true;
    return body;
  };

  TK.views.failed = function (params) {
    const q = params.q;
    const filters = filtersOf(q, ['template', 'since', 'q']);
    const sel = new Set();
    let shown = [];
    const list = h('div'), pager = h('div'), msg = h('div', { class: 'msgs' });
    const count = h('span', { class: 'muted' });
    let refresh;
    // The ticked steps, or (all) every step in error of the tasks the
    // filters match, whatever the task's state (as this list shows them),
    // at most MAX_TASKS tasks (more: the server does nothing).
    const bulk = async (action, all) => {
      let body;
      if (all) {
        if (!window.confirm(`${action === 'retry' ? 'Retry' : 'Resolve'} every failed step of the tasks matching these filters (at most ${MAX_TASKS} tasks)?`)) return;
        body = TK.matchingBody(filters, MAX_TASKS);
      } else {
        const steps = shown.filter((r) => sel.has(stepKey(r))).map((r) => ({ task: r.task, step: r.step }));
        if (!steps.length) return;
        body = { steps };
      }
      try {
        const r = await TK.api('/actions/' + action, { method: 'POST', body });
        const errs = (r.errors || []).map((e) => h('li', null, `task ${e.task} ${e.step || ''}: ${e.message}`));
        if (r.failed > errs.length) errs.push(h('li', null, `and ${r.failed - errs.length} more`));
        const why = Object.entries(r.refused || {}).filter(([, n]) => n).map(([k, n]) => `${k}: ${n}`).join(', ');
        TK.flash(msg, r.failed ? 'error' : 'ok',
          `${action === 'retry' ? 'Retried' : 'Resolved'} ${r.done} failed step${r.done === 1 ? '' : 's'} of ${r.matched} ${all ? 'matching task' + (r.matched === 1 ? '' : 's') : 'selected'}` + (r.failed ? `; ${r.failed} refused (${why}):` : '.'),
          errs.length ? h('ul', null, errs) : null);
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
    const allBtn = h('button', { class: 'push-right', disabled: true, title: 'every failed step of the tasks these filters match, not only this page',
      onclick: () => bulk('retry', true) }, 'Retry all matching…');
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
      h('div', { class: 'toolbar' }, h('label', { class: 'check' }, allBox, 'all on this page'), retryBtn, resolveBtn, count, allBtn),
      msg, list, pager);
    const href = (cursor) => '#/failed' + TK.qs(Object.assign({}, filters, { cursor }));
    refresh = async function () {
      const page = await TK.apiInto(list, '/steps' + TK.qs(Object.assign({ state: 'error', limit: TK.PAGE, cursor: q.get('cursor') }, filters)));
      shown = page.steps;
      allBtn.disabled = !shown.length;
      // A selected step that left the page (retried elsewhere) is dropped.
      const keys = new Set(shown.map(stepKey));
      for (const k of [...sel]) if (!keys.has(k)) sel.delete(k);
      draw();
      updateCount();
      TK.swap(pager, [page.next_cursor, q.get('cursor')], () => TK.pager(page.next_cursor, href, !q.get('cursor')));
    };
    return { el, refresh, title: 'Failed steps' };
  };
})();
