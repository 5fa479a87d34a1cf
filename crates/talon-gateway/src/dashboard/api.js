// Talon dashboard, shared helpers: safe text, DOM building, the token, requests, the live
// events stream, and how a session transcript is shown. Loaded before app.js; everything is
// exported on `window.Talon`.
//
// Rules this file enforces for the pages:
// - Text from the server (written by models, users and MCP servers) reaches the page only as
//   text nodes, after `visible()` has spelled out control, bidi and invisible characters.
//   Nothing here ever sets innerHTML or puts server data into href/src.
// - The token lives in sessionStorage (this tab only) and travels only in the Authorization
//   header of same-origin fetches, never in a URL.
'use strict';

(function () {
  // ---------------------------------------------------------------------------------------
  // Visible text

  // C0/C1 controls, DEL, surrogates, format characters (bidi embeddings, overrides, isolates
  // and marks, zero-width spaces and joiners, soft hyphen, BOM, tag characters, ...), line and
  // paragraph separators, and characters that render as nothing (as talon-core's visible.rs).
  const HIDDEN = /[\p{Cc}\p{Cf}\p{Cs}\u2028\u2029\u034F\u115F\u1160\u17B4\u17B5\u180B-\u180F\u2060-\u206F\u3164\uFFA0\u{E0000}-\u{E0FFF}]/gu;
  const SHORT = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

  function escapeChar(ch) {
    return SHORT[ch] || '\\u{' + ch.codePointAt(0).toString(16) + '}';
  }

  function kept(ch, multiline) {
    return multiline && (ch === '\n' || ch === '\t');
  }

  // `s` with every hidden character spelled out (`\u{202e}`, `\u{1b}`); `multiline` keeps line
  // breaks and tabs.
  function visible(s, multiline) {
    const text = s == null ? '' : String(s);
    return text.replace(HIDDEN, (ch) => (kept(ch, multiline) ? ch : escapeChar(ch)));
  }

  // The same text as a fragment whose escapes are marked (span.esc), so an escape stands out
  // from text that merely looks like one. Its textContent equals visible(s, multiline).
  function visibleFragment(s, multiline) {
    const text = s == null ? '' : String(s);
    const frag = document.createDocumentFragment();
    let last = 0;
    for (const m of text.matchAll(HIDDEN)) {
      if (kept(m[0], multiline)) continue;
      if (m.index > last) frag.appendChild(document.createTextNode(text.slice(last, m.index)));
      const esc = document.createElement('span');
      esc.className = 'esc';
      esc.textContent = escapeChar(m[0]);
      frag.appendChild(esc);
      last = m.index + m[0].length;
    }
    if (last < text.length) frag.appendChild(document.createTextNode(text.slice(last)));
    return frag;
  }

  // ---------------------------------------------------------------------------------------
  // DOM building

  // h('div', {class: 'x', data: {sessionKey: k}, on: {click: f}}, child, ...). Attribute
  // values go through setAttribute; string children become text (one line, visible()).
  function h(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value == null || value === false) continue;
      if (name === 'on') {
        for (const [event, fn] of Object.entries(value)) node.addEventListener(event, fn);
      } else if (name === 'data') {
        for (const [key, v] of Object.entries(value)) {
          if (v != null) node.setAttribute('data-' + key, String(v));
        }
      } else {
        node.setAttribute(name, value === true ? '' : String(value));
      }
    }
    append(node, children);
    return node;
  }

  function append(node, children) {
    for (const child of children.flat(Infinity)) {
      if (child == null || child === false) continue;
      node.appendChild(child instanceof Node ? child : visibleFragment(String(child), false));
    }
    return node;
  }

  // A block of multi-line text (line breaks kept, everything else visible).
  function block(text, cls) {
    const pre = h('pre', { class: cls || 'block' });
    pre.appendChild(visibleFragment(text, true));
    return pre;
  }

  // The first `lines` lines of `text` (at most `chars` characters), and whether it was cut.
  function firstLines(text, lines, chars) {
    const s = text == null ? '' : String(text);
    let cut = s.split('\n').slice(0, lines).join('\n');
    if (cut.length > chars) cut = cut.slice(0, chars);
    return { text: cut, more: cut.length < s.length };
  }

  function oneLine(text, chars) {
    const s = text == null ? '' : String(text).replace(/\s+/g, ' ').trim();
    return s.length > chars ? s.slice(0, chars) + '…' : s;
  }

  function pad(n) {
    return String(n).padStart(2, '0');
  }

  // Unix milliseconds as local `YYYY-MM-DD HH:MM:SS`.
  function fmtTime(ms) {
    if (typeof ms !== 'number' || !isFinite(ms) || ms <= 0) return '—';
    const d = new Date(ms);
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' +
      pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
  }

  function fmtDuration(ms) {
    if (typeof ms !== 'number' || !isFinite(ms)) return '—';
    if (ms < 1000) return Math.round(ms) + ' ms';
    const s = Math.round(ms / 1000);
    return s < 60 ? s + ' s' : Math.floor(s / 60) + 'm ' + pad(s % 60) + 's';
  }

  // ---------------------------------------------------------------------------------------
  // Token and user (sessionStorage: this tab only)

  const TOKEN_KEY = 'talon.dashboard.token';
  const USER_KEY = 'talon.dashboard.user';
  const memory = {};

  function stored(key) {
    try { return window.sessionStorage.getItem(key); } catch (e) { return memory[key] || null; }
  }

  function store(key, value) {
    try {
      if (value == null) window.sessionStorage.removeItem(key);
      else window.sessionStorage.setItem(key, value);
    } catch (e) {
      if (value == null) delete memory[key]; else memory[key] = value;
    }
  }

  const auth = {
    token: () => stored(TOKEN_KEY),
    setToken: (t) => store(TOKEN_KEY, t || null),
    user: () => stored(USER_KEY) || '',
    setUser: (u) => store(USER_KEY, u || null),
    // Called when a request with the token is refused (401); app.js sets it.
    onUnauthorized: () => {},
  };

  // ---------------------------------------------------------------------------------------
  // Requests

  class ApiError extends Error {
    constructor(status, message, body) {
      super(message);
      this.status = status;
      this.body = body;
    }
  }

  // `?a=1&b=2` from an object, leaving out null, undefined and empty values.
  function query(params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params || {})) {
      if (v != null && v !== '') q.set(k, String(v));
    }
    const s = q.toString();
    return s ? '?' + s : '';
  }

  function headers(token, extra) {
    const out = Object.assign({ Accept: 'application/json' }, extra || {});
    if (token) out.Authorization = 'Bearer ' + token;
    return out;
  }

  // The error message of a failed response, in any of the gateway's shapes.
  function errorMessage(status, body, text) {
    if (body && typeof body === 'object') {
      const e = body.error;
      if (e && typeof e === 'object' && e.message) return String(e.message);
      if (typeof e === 'string') return e;
    }
    return text ? oneLine(text, 300) : 'HTTP ' + status;
  }

  // A same-origin JSON request: `api('GET', '/v1/sessions', {query: {user}})`,
  // `api('POST', path, {body})`. Resolves to the parsed JSON; rejects with ApiError.
  // `token` overrides the stored one (the login form tries a token before keeping it).
  async function api(method, path, opts) {
    const o = opts || {};
    const token = 'token' in o ? o.token : auth.token();
    const init = {
      method,
      headers: headers(token),
      credentials: 'same-origin',
      cache: 'no-store',
      redirect: 'error',
      signal: o.signal,
    };
    if (method !== 'GET') {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(o.body === undefined ? {} : o.body);
    }
    let res;
    try {
      res = await fetch(path + query(o.query), init);
    } catch (e) {
      if (e && e.name === 'AbortError') throw e;
      throw new ApiError(0, 'request failed: ' + (e && e.message ? e.message : e), null);
    }
    const text = await res.text();
    let body = null;
    try { body = text ? JSON.parse(text) : null; } catch (e) { body = null; }
    if (res.status === 401 && token && !('token' in o)) auth.onUnauthorized();
    if (!res.ok) throw new ApiError(res.status, errorMessage(res.status, body, text), body);
    return body;
  }

  // ---------------------------------------------------------------------------------------
  // Live events: GET /v1/events as server-sent events over fetch (EventSource cannot send the
  // Authorization header), reconnecting with backoff.

  const MAX_EVENT_CHARS = 1 << 20;

  // Reads an SSE body, calling onEvent(name, data) for each event; resolves when it ends.
  async function readSse(body, onEvent) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buf = '';
    let name = '';
    let data = [];
    let size = 0;
    const line = (l) => {
      if (l === '') {
        if (data.length && size <= MAX_EVENT_CHARS) onEvent(name || 'message', data.join('\n'));
        name = '';
        data = [];
        size = 0;
        return;
      }
      if (l[0] === ':') return; // a comment (keep-alive)
      const colon = l.indexOf(':');
      const field = colon < 0 ? l : l.slice(0, colon);
      let value = colon < 0 ? '' : l.slice(colon + 1);
      if (value[0] === ' ') value = value.slice(1);
      if (field === 'event') name = value;
      else if (field === 'data') {
        size += value.length;
        if (size <= MAX_EVENT_CHARS) data.push(value);
      }
    };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += decoder.decode(value, { stream: true });
      for (;;) {
        const m = /\r\n|\r|\n/.exec(buf);
        // A final \r may be the first half of \r\n: wait for the next chunk.
        if (!m || (m[0] === '\r' && m.index === buf.length - 1)) break;
        line(buf.slice(0, m.index));
        buf = buf.slice(m.index + m[0].length);
      }
      if (buf.length > MAX_EVENT_CHARS) buf = ''; // a line that long is dropped, not kept
    }
  }

  // Subscribes to the events of `user`; onEvent({type, data, at}) for each, onStatus(state,
  // detail) with state 'connecting' | 'live' | 'retry' | 'off'. Returns a function that stops.
  function subscribe(user, onEvent, onStatus) {
    let stopped = false;
    let controller = null;
    let timer = null;
    let delay = 1000;
    const connect = async () => {
      if (stopped) return;
      controller = new AbortController();
      onStatus('connecting');
      try {
        const res = await fetch('/v1/events' + query({ user }), {
          headers: headers(auth.token(), { Accept: 'text/event-stream' }),
          credentials: 'same-origin',
          cache: 'no-store',
          redirect: 'error',
          signal: controller.signal,
        });
        if (res.status === 401) {
          auth.onUnauthorized();
          return;
        }
        if (!res.ok || !res.body) throw new Error('HTTP ' + res.status);
        onStatus('live');
        delay = 1000;
        await readSse(res.body, (name, text) => {
          let data;
          try { data = JSON.parse(text); } catch (e) { data = { raw: text }; }
          const type = name !== 'message' ? name : (data && data.type) || 'message';
          onEvent({ type: String(type), data, at: Date.now() });
        });
        throw new Error('the stream ended');
      } catch (e) {
        if (stopped) return;
        onStatus('retry', { delay, error: e && e.message ? e.message : String(e) });
        timer = setTimeout(connect, delay);
        delay = Math.min(delay * 2, 30000);
      }
    };
    connect();
    return () => {
      stopped = true;
      clearTimeout(timer);
      if (controller) controller.abort();
      onStatus('off');
    };
  }

  // ---------------------------------------------------------------------------------------
  // Small pieces of pages

  function errorBox(e) {
    return h('p', { class: 'error' }, e && e.message ? e.message : String(e));
  }

  // A tag; `cls` may hold a server value (a state), so only letters, digits, - and _ are kept.
  function badge(text, cls) {
    return h('span', { class: 'tag ' + String(cls || '').replace(/[^\w -]/g, '') }, text == null ? '' : String(text));
  }

  function button(label, onClick, attrs) {
    return h('button', Object.assign({ type: 'button', on: { click: onClick } }, attrs || {}), label);
  }

  function table(headers, rows) {
    return h('div', { class: 'table-wrap' }, h('table', { class: 'grid' },
      h('thead', {}, h('tr', {}, headers.map((t) => h('th', {}, t)))),
      h('tbody', {}, rows)));
  }

  // `f` runs at most once per `ms`, after the last call.
  function debounce(f, ms) {
    let timer = null;
    return () => { clearTimeout(timer); timer = setTimeout(f, ms); };
  }

  function pretty(value) {
    if (typeof value === 'string') {
      try { return JSON.stringify(JSON.parse(value), null, 2); } catch (e) { return value; }
    }
    return JSON.stringify(value, null, 2);
  }

  // JSON text without the whitespace between tokens (strings kept as written).
  function minifiedJson(text) {
    let out = '';
    let inString = false;
    let escaped = false;
    for (const ch of text) {
      if (inString) {
        out += ch;
        if (escaped) escaped = false;
        else if (ch === '\\') escaped = true;
        else if (ch === '"') inString = false;
      } else if (ch === '"') {
        inString = true;
        out += ch;
      } else if (ch !== ' ' && ch !== '\t' && ch !== '\n' && ch !== '\r') {
        out += ch;
      }
    }
    return out;
  }

  function shellWord(s) {
    return /^[\w@%+=:,./-]+$/.test(s) ? s : JSON.stringify(s);
  }

  function fmtAgo(ms) {
    if (typeof ms !== 'number') return '—';
    const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
    if (s < 60) return s + ' s ago';
    if (s < 3600) return Math.round(s / 60) + ' min ago';
    if (s < 86400) return Math.round(s / 3600) + ' h ago';
    return fmtTime(ms);
  }

  // ---------------------------------------------------------------------------------------
  // A stored session (talon_store::SessionRecord) and its messages (talon_agent::Message)

  const list = (v) => (Array.isArray(v) ? v : []);

  function sessionMeta(s) {
    const items = [
      ['Agent', s.agent_key], ['User', s.owner || '(none)'], ['State', s.state],
      ['Turns', s.turns], ['Tokens in / out', (s.input_tokens || 0) + ' / ' + (s.output_tokens || 0)],
      ['Last stop', s.last_stop || '—'], ['Created', fmtTime(s.created_at)],
      ['Updated', fmtTime(s.updated_at)],
    ];
    const dl = h('dl', { class: 'facts' }, items.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v == null ? '—' : String(v))]));
    if (!s.summary) return dl;
    return h('div', {}, dl, h('details', { class: 'summary' },
      h('summary', {}, 'Compacted summary (through message ' + s.summary_through + ')'), block(s.summary)));
  }

  // One element per stored message (talon_agent::Message), each with data-role.
  function transcript(messages) {
    if (!messages.length) return [h('p', { class: 'muted' }, 'No messages yet.')];
    const toolNames = new Map();
    return messages.map((m) => {
      const role = m && typeof m.role === 'string' ? m.role : 'unknown';
      const box = h('div', { class: 'msg msg-' + role.replace(/[^a-z_]/g, ''), data: { role } });
      if (role === 'user') {
        box.append(h('div', { class: 'msg-head' }, 'User'), block(m.text, 'block prose'));
        if (list(m.images).length) box.append(h('p', { class: 'muted' }, '[' + m.images.length + ' image(s)]'));
      } else if (role === 'assistant') {
        box.append(h('div', { class: 'msg-head' }, 'Assistant'));
        if (m.text) box.append(block(m.text, 'block prose'));
        for (const call of list(m.tool_calls)) {
          toolNames.set(call.id, call.name);
          box.append(h('div', { class: 'tool-call' },
            h('div', {}, 'Tool call ', h('code', { class: 'tool-name' }, call.name), ' ',
              h('span', { class: 'muted' }, call.id)),
            args(call.arguments)));
        }
      } else if (role === 'tool_results') {
        box.append(h('div', { class: 'msg-head' }, 'Tool results'));
        for (const r of list(m.results)) box.append(toolResult(r, toolNames.get(r.call_id)));
      } else {
        box.append(h('div', { class: 'msg-head' }, 'Message (' + role + ')'), block(pretty(m)));
      }
      return box;
    });
  }

  // Tool-call arguments pretty-printed; when that view is not the exact text (escapes, duplicate
  // keys, large numbers, invalid JSON), the text as the model wrote it as well.
  function args(raw) {
    const text = typeof raw === 'string' ? raw : JSON.stringify(raw);
    let parsed;
    try { parsed = JSON.parse(text); } catch (e) {
      return [block(text, 'block args'), h('p', { class: 'muted' }, '(not valid JSON)')];
    }
    const view = block(JSON.stringify(parsed, null, 2), 'block args');
    if (JSON.stringify(parsed) === minifiedJson(text)) return view;
    return [view, h('details', {}, h('summary', {}, 'Exact text (differs from the view above)'), block(text, 'block args'))];
  }

  function toolResult(r, name) {
    const content = r.content == null ? '' : String(r.content);
    const head = firstLines(content, 3, 400);
    const box = h('div', { class: 'tool-result' + (r.is_error ? ' is-error' : '') },
      h('div', {}, h('code', { class: 'tool-name' }, name || r.call_id), ' ',
        r.is_error ? badge('error', 'bad') : badge('ok', 'good'),
        list(r.images).length ? ' [' + r.images.length + ' image(s)]' : ''));
    if (!head.more) {
      box.append(block(content, 'block result'));
    } else {
      box.append(block(head.text + '\n…', 'block result'), h('details', {},
        h('summary', {}, 'Show all (' + content.split('\n').length + ' lines, ' + content.length + ' characters)'),
        block(content, 'block result')));
    }
    return box;
  }

  window.Talon = {
    visible, visibleFragment, h, append, block, firstLines, oneLine, fmtTime, fmtDuration,
    auth, api, ApiError, query, subscribe, readSse,
    errorBox, badge, button, table, debounce, pretty, minifiedJson, shellWord, fmtAgo,
    sessionMeta, transcript,
  };
})();
