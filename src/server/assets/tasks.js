/* The task list: filters and one page at a time. */
'use strict';
(function () {
  const TK = window.TK;
  const { h, table, openRow, errText, taskLink, templateLink, filterForm, filtersOf } = TK;

  // Steps done out of all, as a bar and numbers, with the errors counted.
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
      const page = await TK.apiInto(list, '/tasks' + TK.qs(Object.assign({ limit: TK.PAGE, cursor: q.get('cursor') }, filters)));
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
})();
