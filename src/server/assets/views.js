/* Pieces the list views share: tables, links, the filter form, the
 * failed steps' table. Each list reads one page from the API, never the
 * whole table. */
'use strict';
(function () {
  const TK = window.TK;
  const { h } = TK;
  TK.PAGE = 50;

  // A table's head row: one th per column name.
  const thead = (cols) => h('thead', null, h('tr', null, cols.map((c) => h('th', null, c))));

  const table = (cols, rows, empty) => rows.length
    ? h('table', { class: 'grid-table' }, thead(cols), h('tbody', null, rows))
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

  // Run fetches side by side; each result or its error, never a throw.
  const settle = (ps) => Promise.all(ps.map((p) => p.then((v) => ({ v }), (e) => ({ e }))));

  /* ---- filters shared by tasks and failed ---- */

  const SINCE = [['', 'any time'], ['15m', 'last 15 minutes'], ['1h', 'last hour'], ['24h', 'last 24 hours'], ['7d', 'last 7 days']];

  // A labelled input of a toolbar form.
  const field = (label, input) => h('label', null, h('span', null, label), input);

  // A toolbar form whose submit goes to #/ROUTE with its fields, trimmed, as
  // the query (so the view reloads from it).
  const hashForm = (route, ...children) => h('form', {
    class: 'filters',
    onsubmit: (ev) => {
      ev.preventDefault();
      const o = {};
      for (const [k, v] of new FormData(ev.target).entries()) o[k] = String(v).trim();
      location.hash = '#/' + route + TK.qs(o);
    },
  }, ...children);

  // The filters of a list at #/ROUTE, filled from the query q; applying them
  // changes the URL (so the view reloads at its first page).
  function filterForm(route, q, withState) {
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
    return hashForm(route,
    state ? field('state', state) : null, field('template', tmpl), field('created', since), field('error text', text), names,
    h('div', { class: 'filter-buttons' }, h('button', { type: 'submit', class: 'primary' }, 'Apply'),
      h('a', { class: 'button', href: '#/' + route }, 'Clear')));
  }

  // The non-empty filters among keys, as an object for TK.qs.
  function filtersOf(q, keys) {
    const o = {};
    for (const k of keys) if (q.get(k)) o[k] = q.get(k);
    return o;
  }

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

  Object.assign(TK, { field, hashForm, thead, table, openRow, errText, taskLink, templateLink, settle, filterForm, filtersOf, stepKey, failedTable });
})();
