/* The templates, and one template: its DAG, handlers, retry settings and
 * definition. */
'use strict';
(function () {
  const TK = window.TK;
  const { h, table, templateLink } = TK;

  TK.views.templates = function () {
    const list = h('div');
    const el = h('div', { class: 'page' }, h('h1', null, 'Templates'), list);
    const refresh = async function () {
      const ts = await TK.apiInto(list, '/templates');
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

  // A step's timeout, from its handler (timeout_ms) or the step.
  function timeoutText(st) {
    const hd = st.handler || {};
    const v = hd.timeout_ms !== undefined ? hd.timeout_ms : st.timeout !== undefined ? st.timeout : hd.timeout;
    if (v === undefined || v === null) return '';
    return typeof v === 'number' ? TK.fmtDur(v) : String(v);
  }

  // A handler in one line: kind and what it runs or calls.
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
    const name = params.parts.map(decodeURIComponent).join('/').replace(/^default\//, '');
    const version = params.q.get('version');
    const body = h('div');
    const el = h('div', { class: 'page' }, h('div', { class: 'crumbs' }, h('a', { href: '#/templates' }, 'Templates'), ' / ', name), body);
    const refresh = async function () {
      const t = await TK.apiInto(body, '/templates/' + params.parts.map((p) => encodeURIComponent(decodeURIComponent(p))).join('/') + TK.qs({ version }));
      const def = t.definition || {};
      const steps = Array.isArray(def.steps) ? def.steps : [];
      TK.swap(body, t, () => h('div', null,
        h('h1', null, TK.templateName(t), ' ', h('span', { class: 'muted' }, t.version)),
        t.description ? h('p', null, t.description) : null,
        def.retry && Object.keys(def.retry).length ? h('p', null, h('span', { class: 'muted' }, 'Retry for every step: '), retryText(def.retry)) : null,
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
})();
