/* DOM building, formatting and the API client shared by every view.
 * Every value from the API reaches the page through text nodes and
 * setAttribute, never as markup: h() and s() are the only builders. */
'use strict';
(function () {
  const TK = (window.TK = window.TK || {});
  const SVGNS = 'http://www.w3.org/2000/svg';
  // Each view: (params) => {el, refresh, title}; app.js routes to them.
  TK.views = {};

  function appendKids(el, kids) {
    for (const c of kids) {
      if (c === null || c === undefined || c === false) continue;
      if (Array.isArray(c)) appendKids(el, c);
      else if (c instanceof Node) el.appendChild(c);
      else el.appendChild(document.createTextNode(String(c)));
    }
  }

  // Attributes: on* are listeners, null/undefined/false are left out,
  // true is a bare attribute, style is an object of CSSOM properties (the
  // page's Content-Security-Policy refuses style attributes); everything
  // else is set as text.
  function build(el, attrs, kids) {
    for (const k in attrs || {}) {
      const v = attrs[k];
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else if (k === 'style') Object.assign(el.style, v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
    appendKids(el, kids);
    return el;
  }

  TK.h = (tag, attrs, ...kids) => build(document.createElement(tag), attrs, kids);
  TK.s = (tag, attrs, ...kids) => build(document.createElementNS(SVGNS, tag), attrs, kids);

  // Replace el's children with build(data) only when data changed since
  // the last call: an unchanged refresh touches nothing (no flicker, text
  // selections and focus survive).
  TK.swap = function (el, data, buildFn) {
    const key = JSON.stringify(data === undefined ? null : data);
    if (el.tkLast === key) return false;
    el.tkLast = key;
    el.replaceChildren(buildFn(data));
    return true;
  };

  /* ---- formatting ---- */

  function short(x) {
    return x < 10 ? String(Math.round(x * 10) / 10) : String(Math.round(x));
  }

  // A duration in ms, human: 850ms, 1.5s, 12s, 2m 5s, 3h 10m, 2d 4h.
  TK.fmtDur = function (ms) {
    if (ms === null || ms === undefined || Number.isNaN(ms)) return '–';
    if (ms < 0) return '-' + TK.fmtDur(-ms);
    if (ms < 1000) return Math.round(ms) + 'ms';
    if (ms < 59500) return short(ms / 1000) + 's';
    // Two units at most, the smaller one rounded (and carried when it rounds up).
    const two = (big, small, a, b, per) => {
      let x = Math.floor(ms / big);
      let y = Math.round((ms - x * big) / small);
      if (y === per) { x += 1; y = 0; }
      return x + a + (y ? ' ' + y + b : '');
    };
    if (ms < 3599500) return two(60000, 1000, 'm', 's', 60);
    if (ms < 86370000) return two(3600000, 60000, 'h', 'm', 60);
    return two(86400000, 3600000, 'd', 'h', 24);
  };

  // The store's clock: offset learned from a response that says its now.
  TK.clockOffset = 0;
  TK.now = () => Date.now() + TK.clockOffset;

  function coarse(ms) {
    if (ms < 60000) return Math.max(1, Math.round(ms / 1000)) + 's';
    if (ms < 3600000) return Math.round(ms / 60000) + 'm';
    if (ms < 86400000) return short(ms / 3600000) + 'h';
    return short(ms / 86400000) + 'd';
  }

  TK.fmtAgo = function (t) {
    const d = TK.now() - t;
    if (Math.abs(d) < 1000) return 'just now';
    return d > 0 ? coarse(d) + ' ago' : 'in ' + coarse(-d);
  };

  // Absolute time, UTC, to the millisecond.
  TK.fmtAbs = function (t) {
    if (t === null || t === undefined) return '';
    return new Date(t).toISOString().replace('T', ' ').replace('Z', ' UTC');
  };

  // A <time> that shows how long ago (or until), with the absolute time as
  // its title; TK.tickTimes() keeps the relative text current.
  TK.time = function (t) {
    if (t === null || t === undefined) return TK.h('span', { class: 'muted' }, '–');
    return TK.h('time', { datetime: new Date(t).toISOString(), title: TK.fmtAbs(t), 'data-t': t },
      TK.fmtAgo(t));
  };

  TK.tickTimes = function () {
    for (const el of document.querySelectorAll('time[data-t]'))
      el.textContent = TK.fmtAgo(Number(el.getAttribute('data-t')));
  };

  TK.templateName = (t) => (t ? (t.namespace && t.namespace !== 'default' ? t.namespace + '/' : '') + t.name : '');

  /* ---- colours and badges ---- */

  TK.stateLabel = (s) => String(s || '').replace(/_/g, ' ');

  // A state (or outcome) as a coloured pill.
  TK.badge = function (state, extraClass) {
    return TK.h('span', { class: 'badge st-' + String(state).replace(/[^a-z_]/g, '') + (extraClass ? ' ' + extraClass : '') },
      TK.stateLabel(state));
  };

  TK.TASK_STATES = ['pending', 'in_progress', 'complete', 'error', 'cancelled'];
  TK.STEP_STATES = ['pending', 'in_progress', 'waiting_for_retry', 'complete', 'error',
    'resolved_manually', 'cancelled', 'skipped', 'mapped', 'waiting'];
  TK.OUTCOMES = ['success', 'failure', 'timeout', 'lease_expired', 'fenced_out'];
  TK.SOURCES = {
    computed: 'the backoff policy computed it',
    server: 'the server asked for it (Retry-After or a hint)',
    budget: 'a retry budget deferred the retry',
    in_call: 'in-call retries ran out (batch)',
  };

  /* ---- the API ---- */

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }
  TK.ApiError = ApiError;

  const TOKEN_KEY = 'tasker.token';

  // GET (or POST with a JSON body) under api/v1, relative to the page so a
  // proxy's prefix works. POSTs carry X-Tasker-Request (the server's CSRF
  // check); a 401 asks for the token, once, and keeps it for the tab.
  TK.api = async function (path, opts) {
    opts = opts || {};
    const headers = { Accept: 'application/json' };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = 'Bearer ' + token;
    const init = { method: opts.method || 'GET', headers, cache: 'no-store' };
    if (init.method === 'POST') {
      headers['X-Tasker-Request'] = '1';
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(opts.body || {});
    }
    let res;
    try {
      res = await fetch('api/v1' + path, init);
    } catch (e) {
      throw new ApiError(0, 'network', 'the server cannot be reached (' + e.message + ')');
    }
    const text = await res.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch (e) {
      data = null;
    }
    if (res.ok) return data;
    const err = data && data.error ? data.error : {};
    const message = err.message || 'HTTP ' + res.status + ' from ' + path;
    if (res.status === 401) {
      if (token) sessionStorage.removeItem(TOKEN_KEY);
      TK.askToken(token ? 'The token was refused; enter it again.' : message);
    }
    throw new ApiError(res.status, err.code || 'http', message);
  };

  // The token form: one at a time, shown until a token is given.
  TK.askToken = function (why) {
    if (document.getElementById('token-dialog')) return;
    const input = TK.h('input', { type: 'password', autocomplete: 'off', placeholder: 'token', id: 'token-input' });
    const box = TK.h('div', { id: 'token-dialog', class: 'dialog-backdrop' },
      TK.h('form', {
        class: 'dialog',
        onsubmit: (ev) => {
          ev.preventDefault();
          if (!input.value) return;
          sessionStorage.setItem(TOKEN_KEY, input.value.trim());
          box.remove();
          TK.refreshNow();
        },
      },
      TK.h('h2', null, 'This server needs a token'),
      TK.h('p', { class: 'muted' }, why),
      TK.h('p', null, 'It is kept in this tab only (sessionStorage) and sent as a bearer token.'),
      input,
      TK.h('div', { class: 'dialog-buttons' }, TK.h('button', { type: 'submit', class: 'primary' }, 'Use token'))));
    document.body.appendChild(box);
    input.focus();
  };

  // Query string from an object, leaving out empty values.
  TK.qs = function (obj) {
    const p = new URLSearchParams();
    for (const k in obj) if (obj[k] !== undefined && obj[k] !== null && obj[k] !== '') p.set(k, obj[k]);
    const s = p.toString();
    return s ? '?' + s : '';
  };

  /* ---- small shared pieces ---- */

  // GET path from the API; when that fails, el shows the error (once, as
  // TK.swap does) and the error is thrown on, so the view's refresh stops.
  TK.apiInto = async function (el, path) {
    try {
      return await TK.api(path);
    } catch (e) {
      TK.swap(el, { e: e.message }, () => TK.errorBox(e));
      throw e;
    }
  };

  // A message box: kind is ok, error or info; children as TK.h takes them.
  TK.flashBox = (kind, ...children) => TK.h('div', { class: 'flash flash-' + kind }, ...children);

  // A message line under a toolbar, in place of what el held.
  TK.flash = function (el, kind, ...children) {
    el.replaceChildren(TK.flashBox(kind, ...children));
  };

  TK.errorBox = (e) => TK.flashBox('error', e.message || String(e));

  // A legend: [class, label, title] per item, the swatch styled like the chart.
  TK.legend = function (items) {
    return TK.h('div', { class: 'legend' }, items.map(([cls, label, title]) =>
      TK.h('span', { class: 'legend-item', title: title || null },
        TK.h('span', { class: 'swatch ' + cls }), label)));
  };

  // First page and Next (the API's cursor); hrefFor(cursor) makes the link.
  TK.pager = function (nextCursor, hrefFor, first) {
    return TK.h('div', { class: 'pager' },
      TK.h('a', { class: 'button' + (first ? ' disabled' : ''), href: hrefFor(null) }, '⇤ First page'),
      nextCursor !== null && nextCursor !== undefined
        ? TK.h('a', { class: 'button', href: hrefFor(nextCursor) }, 'Next →')
        : TK.h('span', { class: 'muted' }, 'last page'));
  };
})();
