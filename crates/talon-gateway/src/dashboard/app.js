// Talon dashboard: the shell (login, header, nav, hash router) and one function per page.
// Adding a page: call `page({name, title, render})` below (or `Talon.page(...)` from a later
// deferred script); `render(root)` fills `root` and may return hooks {onEvent(ev), onPending(),
// dispose()}. The nav entry (in registration order) and the `#/<name>` route follow.
// Server text reaches the page only through Talon.h / Talon.block (text nodes, visible()).
'use strict';

(function () {
  const T = window.Talon;
  const { h, block, api, visible, errorBox, badge, button, table, debounce, pretty, shellWord, fmtAgo } = T;
  const { sessionMeta, transcript } = T;

  const EVENT_KINDS = [
    'run_started', 'run_finished', 'tool_started', 'tool_finished', 'tool_progress',
    'approval_requested', 'approval_resolved', 'question_asked', 'question_answered',
  ];
  const MAX_EVENTS = 500;
  const POLL_MS = 2000;

  const state = {
    auth: null, // 'token' (a token was accepted) | 'open' (the gateway needs none) | null
    user: '',
    events: [], // newest first, at most MAX_EVENTS
    pending: { approvals: [], questions: [], error: null },
    current: null, // {name, hooks}
    stopEvents: null,
    pollTimer: null,
  };

  const pages = [];
  function page(spec) {
    pages.push(spec);
  }

  const $ = (id) => document.getElementById(id);
  const enc = encodeURIComponent;
  const list = (v) => (Array.isArray(v) ? v : []);

  // ---------------------------------------------------------------------------------------
  // Shell

  let noticeTimer = null;
  function notify(text, kind) {
    const n = $('notice');
    n.className = 'notice ' + (kind || 'info');
    n.textContent = visible(text);
    n.hidden = false;
    clearTimeout(noticeTimer);
    noticeTimer = setTimeout(() => { n.hidden = true; }, 8000);
  }

  function showLogin(message) {
    $('app').hidden = true;
    $('login').hidden = false;
    const err = $('login-error');
    err.textContent = visible(message || '');
    err.hidden = !message;
    $('login-token').focus();
  }

  async function onLogin(ev) {
    ev.preventDefault();
    const input = $('login-token');
    const button = $('login-submit');
    const token = input.value.trim();
    if (!token) return showLogin('Enter the gateway token.');
    button.disabled = true;
    try {
      await api('GET', '/v1/models', { token });
      T.auth.setToken(token);
      input.value = '';
      enter('token');
    } catch (e) {
      showLogin(e.status === 401 ? 'The gateway refused this token (401).'
        : 'Cannot reach the gateway: ' + e.message);
    } finally {
      button.disabled = false;
    }
  }

  function enter(mode) {
    state.auth = mode;
    $('login').hidden = true;
    $('app').hidden = false;
    $('whoami').textContent = mode === 'token' ? 'Logged in with the gateway token'
      : 'Open gateway (no token required)';
    $('logout').hidden = mode !== 'token';
    state.user = T.auth.user();
    $('view-user').value = state.user;
    startLive();
    if (!location.hash) history.replaceState(null, '', '#/' + pages[0].name);
    route();
  }

  function logout(message) {
    state.auth = null;
    T.auth.setToken(null);
    stopLive();
    disposePage();
    state.events = [];
    state.pending = { approvals: [], questions: [], error: null };
    $('page').replaceChildren();
    showLogin(message || '');
  }

  function onUserChange() {
    const user = $('view-user').value.trim();
    if (user === state.user) return;
    state.user = user;
    T.auth.setUser(user);
    stopLive();
    state.events = [];
    state.pending = { approvals: [], questions: [], error: null };
    startLive();
    route();
  }

  function startLive() {
    state.stopEvents = T.subscribe(state.user, onEvent, onStreamStatus);
    refreshPending();
    state.pollTimer = setInterval(refreshPending, POLL_MS);
  }

  function stopLive() {
    if (state.stopEvents) state.stopEvents();
    state.stopEvents = null;
    clearInterval(state.pollTimer);
    state.pollTimer = null;
  }

  function onStreamStatus(s, detail) {
    const el = $('stream-status');
    el.className = 'stream-status ' + s;
    el.textContent = s === 'live' ? 'events: live'
      : s === 'connecting' ? 'events: connecting…'
        : s === 'retry' ? 'events: reconnecting in ' + Math.round(detail.delay / 1000) + ' s'
          : 'events: off';
    el.title = s === 'retry' ? visible(detail.error) : 'Live events stream';
  }

  function onEvent(ev) {
    state.events.unshift(ev);
    if (state.events.length > MAX_EVENTS) state.events.length = MAX_EVENTS;
    if (/^(approval|question)_/.test(ev.type)) refreshPending();
    hook('onEvent', ev);
  }

  function hook(name, arg) {
    const hooks = state.current && state.current.hooks;
    if (hooks && typeof hooks[name] === 'function') {
      try { hooks[name](arg); } catch (e) { console.error(e); }
    }
  }

  let pendingBusy = false;
  let pendingAgain = false;
  async function refreshPending() {
    if (!state.auth) return;
    if (pendingBusy) { pendingAgain = true; return; }
    pendingBusy = true;
    const user = state.user;
    try {
      const [a, q] = await Promise.all([
        api('GET', '/v1/approvals', { query: { user } }),
        api('GET', '/v1/questions', { query: { user } }),
      ]);
      if (user === state.user) {
        state.pending = { approvals: list(a && a.pending), questions: list(q && q.pending), error: null };
      }
    } catch (e) {
      state.pending.error = e.message;
    }
    pendingBusy = false;
    if (!state.auth) return;
    const n = state.pending.approvals.length + state.pending.questions.length;
    const badge = $('pending-count');
    badge.textContent = String(n);
    badge.classList.toggle('has-pending', n > 0);
    badge.title = state.pending.error ? 'cannot poll: ' + visible(state.pending.error) : n + ' waiting';
    hook('onPending');
    if (pendingAgain) { pendingAgain = false; refreshPending(); }
  }

  function buildNav() {
    const nav = $('nav');
    for (const p of pages) {
      const link = h('a', { href: '#/' + p.name, data: { page: p.name } }, p.title);
      if (p.badge) link.append(' ', h('span', { id: p.badge, class: 'badge' }, '0'));
      nav.append(link);
    }
  }

  function disposePage() {
    hook('dispose');
    state.current = null;
  }

  function route() {
    if (!state.auth) return;
    const m = /^#\/([a-z0-9-]+)/.exec(location.hash);
    const spec = pages.find((p) => m && p.name === m[1]) || pages[0];
    disposePage();
    $('notice').hidden = true;
    for (const a of $('nav').querySelectorAll('a[data-page]')) {
      if (a.getAttribute('data-page') === spec.name) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    const root = h('div', { class: 'page page-' + spec.name });
    $('page').replaceChildren(h('h1', {}, spec.title), root);
    document.title = spec.title + ' · Talon';
    state.current = { name: spec.name, hooks: {} };
    state.current.hooks = spec.render(root) || {};
  }

  // ---------------------------------------------------------------------------------------
  // Sessions: the list, and the selected session's transcript (cancel, send a message).

  page({ name: 'sessions', title: 'Sessions', render: renderSessions });

  function renderSessions(root) {
    let selected = null; // the selected session's key
    const limit = h('select', { id: 'session-limit', on: { change: () => loadList() } },
      [50, 100, 500].map((n) => h('option', { value: n, selected: n === 100 }, String(n))));
    const listBox = h('div', { id: 'session-list', class: 'list', 'aria-busy': 'true' });
    const detail = h('section', { id: 'session-detail', class: 'detail' },
      h('p', { class: 'muted' }, 'Select a session to see its transcript.'));
    root.append(
      h('div', { class: 'toolbar' }, h('label', {}, 'Most recent ', limit),
        button('Refresh', () => loadList(), { class: 'secondary' })),
      h('div', { class: 'split' }, listBox, detail));

    async function loadList() {
      listBox.setAttribute('aria-busy', 'true');
      try {
        const data = await api('GET', '/v1/sessions', { query: { user: state.user, limit: limit.value } });
        const sessions = list(data && data.sessions);
        listBox.replaceChildren(...sessions.map(sessionRow));
        if (!sessions.length) {
          listBox.append(h('p', { class: 'muted' }, state.user
            ? 'No sessions of user ' + state.user + '.' : 'No sessions without a user.'));
        }
      } catch (e) {
        listBox.replaceChildren(errorBox(e));
      }
      listBox.setAttribute('aria-busy', 'false');
    }

    function sessionRow(s) {
      const row = button([
        h('span', { class: 'row-title' }, s.key),
        h('span', { class: 'row-meta' }, badge(s.state, 'state-' + s.state), ' ', s.agent_key,
          ' · ', String(s.turns), ' turns · ', fmtAgo(s.updated_at)),
      ], () => select(s.key), { class: 'row', data: { 'session-key': s.key } });
      if (s.key === selected) row.classList.add('selected');
      return row;
    }

    function select(key) {
      selected = key;
      for (const row of listBox.querySelectorAll('[data-session-key]')) {
        row.classList.toggle('selected', row.getAttribute('data-session-key') === key);
      }
      const meta = h('div', { class: 'meta' });
      const transcriptBox = h('div', { id: 'transcript', class: 'transcript', 'aria-busy': 'true' });
      const text = h('textarea', { id: 'composer-text', rows: 3, placeholder: 'Send a message in this session…' });
      const status = h('p', { class: 'muted composer-status' });
      const send = h('button', { type: 'submit' }, 'Send');
      const composer = h('form', { class: 'composer', on: { submit: (ev) => { ev.preventDefault(); sendMessage(); } } },
        text, h('div', { class: 'actions' }, send, status));
      let session = null;

      async function refresh() {
        try {
          const data = await api('GET', '/v1/sessions/' + enc(key), { query: { user: state.user } });
          if (selected !== key) return;
          session = data.session || {};
          meta.replaceChildren(sessionMeta(session));
          transcriptBox.replaceChildren(...transcript(list(data.messages)));
        } catch (e) {
          transcriptBox.replaceChildren(errorBox(e));
        }
        transcriptBox.setAttribute('aria-busy', 'false');
      }

      async function cancel() {
        try {
          await api('POST', '/v1/sessions/' + enc(key) + '/cancel', { query: { user: state.user } });
          notify('Cancelled the turn running in the session.');
        } catch (e) {
          notify(e.message, 'error');
        }
        setTimeout(refresh, 500);
      }

      async function sendMessage() {
        const body = { text: text.value, agent: session ? session.agent_key : undefined };
        if (state.user) body.user = state.user;
        if (!body.text.trim()) return;
        send.disabled = true;
        status.textContent = 'The turn is running…';
        try {
          const res = await api('POST', '/v1/sessions/' + enc(key) + '/messages', { body });
          text.value = '';
          const stop = (res && res.stop) || {};
          status.textContent = visible('Turn ended: ' + stop.reason + (stop.detail ? ' (' + stop.detail + ')' : ''));
        } catch (e) {
          status.textContent = visible(e.message);
        }
        send.disabled = false;
        refresh();
      }

      detail.replaceChildren(
        h('h2', { class: 'session-key' }, key),
        meta,
        h('div', { class: 'toolbar' }, button('Refresh', refresh, { class: 'secondary' }),
          button('Cancel running turn', cancel, { class: 'danger', id: 'session-cancel' })),
        transcriptBox, composer);
      detail.refreshTranscript = refresh;
      refresh();
    }

    const reloadList = debounce(loadList, 400);
    loadList();
    return {
      onEvent(ev) {
        if (ev.type !== 'run_started' && ev.type !== 'run_finished') return;
        reloadList();
        if (ev.data && ev.data.session_key === selected && detail.refreshTranscript) {
          detail.refreshTranscript();
        }
      },
    };
  }

  // ---------------------------------------------------------------------------------------
  // Live events, newest first.

  page({ name: 'events', title: 'Live events', render: renderEvents });

  function renderEvents(root) {
    const filter = h('select', { id: 'event-filter', on: { change: () => redraw() } },
      h('option', { value: '' }, 'all types'), [...EVENT_KINDS, 'lagged'].map((k) => h('option', { value: k }, k)));
    const listBox = h('div', { id: 'event-list', class: 'event-list' });
    const empty = h('p', { class: 'muted' }, 'No events yet. They appear here as they happen (the last ' + MAX_EVENTS + ' are kept).');
    root.append(h('div', { class: 'toolbar' }, h('label', {}, 'Show ', filter),
      button('Clear', () => { state.events = []; redraw(); }, { class: 'secondary' })), empty, listBox);

    const wanted = (ev) => !filter.value || ev.type === filter.value;
    function redraw() {
      listBox.replaceChildren(...state.events.filter(wanted).map(eventRow));
      empty.hidden = listBox.children.length > 0;
    }
    redraw();
    return {
      onEvent(ev) {
        if (!wanted(ev)) return;
        listBox.prepend(eventRow(ev));
        while (listBox.children.length > MAX_EVENTS) listBox.lastChild.remove();
        empty.hidden = true;
      },
    };
  }

  function eventRow(ev) {
    const d = ev.data && typeof ev.data === 'object' ? ev.data : {};
    const r = d.request && typeof d.request === 'object' ? d.request : {};
    const t = new Date(ev.at);
    const time = T.fmtTime(ev.at).slice(11) + '.' + String(t.getMilliseconds()).padStart(3, '0');
    const bad = d.is_error === true || d.decision === 'deny' || ev.type === 'lagged';
    return h('details', { class: 'event-row' + (bad ? ' is-error' : ''), data: { 'event-type': ev.type } },
      h('summary', {},
        h('span', { class: 'ev-time' }, time),
        h('span', { class: 'ev-type' }, ev.type),
        h('span', { class: 'ev-where' }, d.agent_key || r.agent || '', ' ', h('span', { class: 'muted' }, d.session_key || r.session || '')),
        h('span', { class: 'ev-detail' }, describeEvent(ev.type, d, r))),
      block(pretty(d)));
  }

  function describeEvent(type, d, r) {
    const one = (s) => T.oneLine(s, 160);
    switch (type) {
      case 'tool_started': return d.tool + ' (call ' + d.call_id + ')';
      case 'tool_finished': return d.tool + (d.is_error ? ' failed' : ' ok') + ' in ' + T.fmtDuration(d.elapsed);
      case 'tool_progress': return d.tool + ' ' + d.progress + (d.total != null ? '/' + d.total : '') + (d.message ? ' ' + one(d.message) : '');
      case 'approval_requested': return r.tool + ': ' + one(r.summary);
      case 'approval_resolved': return d.tool + ' → ' + d.decision;
      case 'question_asked': return one(r.message);
      case 'question_answered': return d.action;
      case 'run_started': return 'via ' + d.channel;
      case 'run_finished': return d.stop + ' after ' + d.iterations + ' iteration(s), ' + T.fmtDuration(d.elapsed);
      case 'team': return d.team + ' ' + String(d.change || '').replace(/_/g, ' ') + (d.task_id ? ' #' + d.task_id + ' ' + one(d.subject) : ' to ' + d.subject);
      case 'lagged': return one(d.error || d.missed + ' events dropped');
      default: return one(JSON.stringify(d));
    }
  }

  // ---------------------------------------------------------------------------------------
  // Approvals and questions waiting for a person (polled, and refreshed on their events).

  page({ name: 'approvals', title: 'Approvals & questions', badge: 'pending-count', render: renderApprovals });

  function renderApprovals(root) {
    const approvals = h('div', { id: 'approval-list', class: 'cards' });
    const questions = h('div', { id: 'question-list', class: 'cards' });
    const noApprovals = h('p', { class: 'muted' }, 'No approval is waiting.');
    const noQuestions = h('p', { class: 'muted' }, 'No question is waiting.');
    const pollError = h('p', { class: 'error' });
    root.append(pollError, h('h2', {}, 'Approvals'), noApprovals, approvals,
      h('h2', {}, 'Questions'), noQuestions, questions);
    const approvalCards = new Map();
    const questionCards = new Map();
    function sync() {
      pollError.hidden = !state.pending.error;
      pollError.textContent = visible(state.pending.error ? 'Cannot poll: ' + state.pending.error : '');
      reconcile(approvals, approvalCards, state.pending.approvals, approvalCard);
      reconcile(questions, questionCards, state.pending.questions, questionCard);
      noApprovals.hidden = approvalCards.size > 0;
      noQuestions.hidden = questionCards.size > 0;
    }
    sync();
    refreshPending();
    return { onPending: sync };
  }

  // Keeps one card per item (by id), so a card being answered is never rebuilt under the user.
  function reconcile(container, cards, items, make) {
    const ids = new Set(items.map((i) => String(i.id)));
    for (const [id, card] of cards) {
      if (!ids.has(id)) { card.remove(); cards.delete(id); }
    }
    items.forEach((item, i) => {
      const id = String(item.id);
      let card = cards.get(id);
      if (!card) { card = make(item); cards.set(id, card); }
      if (card.update) card.update(item);
      if (container.children[i] !== card) container.insertBefore(card, container.children[i] || null);
    });
  }

  function expiry(item) {
    const left = item.expires_at - Date.now();
    return 'Asked ' + T.fmtTime(item.requested_at) + (left > 0 ? ' · expires in ' + T.fmtDuration(left) : ' · expired');
  }

  function origin(item) {
    return h('div', { class: 'row-meta' }, 'agent ', h('b', {}, item.agent || '(default)'),
      ' · user ', h('b', {}, item.user || '(none)'), ' · session ', h('span', { class: 'muted' }, item.session));
  }

  function approvalCard(a) {
    const card = h('article', { class: 'card approval', data: { 'approval-id': String(a.id) } });
    const when = h('p', { class: 'muted' });
    const status = h('p', { class: 'card-status', role: 'status' });
    const reason = h('input', { type: 'text', class: 'deny-reason', placeholder: 'Reason for denying (optional, shown to the model)' });
    const buttons = [button('Allow once', () => decide('allow'), { class: 'good', data: { decision: 'allow' } })];
    if (a.always) buttons.push(button('Allow always', () => decide('allow_always'), { class: 'secondary', data: { decision: 'allow_always' } }));
    buttons.push(button('Deny', () => decide('deny'), { class: 'danger', data: { decision: 'deny' } }));
    T.append(card, [
      h('header', {}, h('code', { class: 'tool-name' }, a.tool), ' ', h('span', { class: 'muted' }, a.id)),
      origin(a),
      h('div', { class: 'label' }, 'Would run'), block(a.summary, 'block command'),
      h('p', {}, h('span', { class: 'label' }, 'Why: '), a.reason),
      a.always ? h('p', {}, h('span', { class: 'label' }, '“Allow always” remembers: '), h('code', {}, a.always)) : null,
      when, h('div', { class: 'actions' }, buttons, reason), status]);
    card.update = (item) => { when.textContent = expiry(item); };

    async function decide(decision) {
      const body = { id: a.id, decision: decision === 'allow' ? 'allow_once' : decision };
      if (decision === 'deny' && reason.value.trim()) body.reason = reason.value.trim();
      buttons.forEach((b) => { b.disabled = true; });
      status.textContent = 'Sending…';
      try {
        const res = await api('POST', '/v1/approvals', { query: { user: state.user }, body });
        status.textContent = 'Answered: ' + visible(res && res.decision);
        card.classList.add('answered');
      } catch (e) {
        status.textContent = visible(e.message);
        buttons.forEach((b) => { b.disabled = false; });
      }
      refreshPending();
    }
    return card;
  }

  let fieldSeq = 0;

  // An input for one field of an elicitation schema; read() gives {value} or {missing}.
  function schemaField(key, spec, required) {
    const s = spec && typeof spec === 'object' ? spec : {};
    const name = 'field-' + (++fieldSeq);
    const title = h('div', { class: 'field-title' }, s.title || key, required ? ' *' : '');
    const parts = [title];
    if (s.description) parts.push(block(s.description, 'block prose'));
    const choices = (values, labels) => list(values).map((v, i) => ({ value: v, label: labels && labels[i] != null ? labels[i] : v }));
    const many = s.type === 'array' && s.items && (s.items.enum || s.items.anyOf);
    const options = many ? choices(s.items.enum || list(s.items.anyOf).map((o) => o.const), s.items.enum ? null : list(s.items.anyOf).map((o) => o.title))
      : s.enum ? choices(s.enum, s.enumNames)
        : s.oneOf ? choices(list(s.oneOf).map((o) => o.const), list(s.oneOf).map((o) => o.title)) : null;
    let read;
    if (options) {
      const inputs = options.map((o, i) => {
        const input = h('input', { type: many ? 'checkbox' : 'radio', name, value: String(i) });
        parts.push(h('label', { class: 'choice' }, input, ' ', String(o.label)));
        return input;
      });
      read = () => {
        const picked = options.filter((o, i) => inputs[i].checked).map((o) => o.value);
        if (many) return picked.length ? { value: picked } : { missing: true };
        return picked.length ? { value: picked[0] } : { missing: true };
      };
    } else if (s.type === 'boolean') {
      const input = h('input', { type: 'checkbox', name });
      parts.push(h('label', { class: 'choice' }, input, ' yes'));
      read = () => ({ value: input.checked });
    } else {
      const numeric = s.type === 'number' || s.type === 'integer';
      const input = h('input', { type: numeric ? 'number' : 'text', name, class: 'answer-text' });
      parts.push(input);
      read = () => (input.value === '' ? { missing: true } : { value: numeric ? Number(input.value) : input.value });
    }
    return { key, label: s.title || key, required, element: h('fieldset', { class: 'field' }, parts), read };
  }

  function questionCard(q) {
    const card = h('article', { class: 'card question', data: { 'question-id': String(q.id) } });
    const schema = q.requestedSchema && typeof q.requestedSchema === 'object' ? q.requestedSchema : {};
    const props = schema.properties && typeof schema.properties === 'object' ? schema.properties : {};
    const required = list(schema.required);
    const fields = Object.entries(props).map(([k, f]) => schemaField(k, f, required.includes(k)));
    const when = h('p', { class: 'muted' });
    const status = h('p', { class: 'card-status', role: 'status' });
    const buttons = [
      button('Answer', () => answer('accept'), { class: 'good', data: { answer: 'accept' } }),
      button('Decline', () => answer('decline'), { class: 'secondary', data: { answer: 'decline' } }),
      button('Dismiss', () => answer('cancel'), { class: 'secondary', data: { answer: 'cancel' } }),
    ];
    T.append(card, [h('header', {}, 'Question ', h('span', { class: 'muted' }, q.id)), origin(q),
      block(q.message, 'block prose'), fields.map((f) => f.element), when,
      h('div', { class: 'actions' }, buttons), status]);
    card.update = (item) => { when.textContent = expiry(item); };

    async function answer(action) {
      const body = { id: q.id, action };
      if (action === 'accept') {
        const answers = [];
        for (const f of fields) {
          const got = f.read();
          if (got.missing && f.required) {
            status.textContent = 'Answer “' + visible(f.label) + '” first.';
            return;
          }
          if (!got.missing) answers.push([f.key, got.value]);
        }
        body.content = Object.fromEntries(answers); // own keys, even one named __proto__
      }
      buttons.forEach((b) => { b.disabled = true; });
      status.textContent = 'Sending…';
      try {
        await api('POST', '/v1/questions', { query: { user: state.user }, body });
        status.textContent = 'Sent (' + action + ').';
        card.classList.add('answered');
      } catch (e) {
        status.textContent = visible(e.message);
        buttons.forEach((b) => { b.disabled = false; });
      }
      refreshPending();
    }
    return card;
  }

  // ---------------------------------------------------------------------------------------
  // Agents: the list, each one's context files and tools.

  page({ name: 'agents', title: 'Agents', render: renderAgents });

  function renderAgents(root) {
    const note = h('p', { class: 'muted' });
    note.hidden = true;
    const listBox = h('div', { id: 'agent-list', class: 'list', 'aria-busy': 'true' });
    const detail = h('section', { id: 'agent-detail', class: 'detail' },
      h('p', { class: 'muted' }, 'Select an agent to see its context files and tools.'));
    root.append(note, h('div', { class: 'split' }, listBox, detail));
    let selected = null;

    async function load() {
      let agents;
      try {
        const data = await api('GET', '/v1/agents');
        agents = list(data && data.agents);
      } catch (e) {
        if (e.status !== 404) { listBox.replaceChildren(errorBox(e)); listBox.setAttribute('aria-busy', 'false'); return; }
        try {
          const models = await api('GET', '/v1/models');
          agents = list(models && models.data).map((m) => ({ key: m.id, created_at: m.created * 1000, files: null }));
          note.textContent = 'This gateway has no GET /v1/agents: agents listed from /v1/models, without their files.';
          note.hidden = false;
        } catch (e2) {
          listBox.replaceChildren(errorBox(e2)); listBox.setAttribute('aria-busy', 'false'); return;
        }
      }
      listBox.replaceChildren(...agents.map((a) => button([
        h('span', { class: 'row-title' }, a.key),
        h('span', { class: 'row-meta' }, a.files ? a.files.length + ' file(s) · ' : '', 'created ', T.fmtTime(a.created_at)),
      ], () => select(a), { class: 'row', data: { 'agent-key': a.key } })));
      if (!agents.length) listBox.append(h('p', { class: 'muted' }, 'No agents.'));
      listBox.setAttribute('aria-busy', 'false');
    }

    function select(agent) {
      selected = agent.key;
      for (const row of listBox.querySelectorAll('[data-agent-key]')) {
        row.classList.toggle('selected', row.getAttribute('data-agent-key') === agent.key);
      }
      const viewer = h('div', { id: 'agent-file', class: 'file-viewer' });
      const files = agent.files == null ? h('p', { class: 'muted' }, 'Context files are not available from this gateway.')
        : !agent.files.length ? h('p', { class: 'muted' }, 'No context files.')
          : h('div', { class: 'file-list' }, agent.files.map((name) =>
            button(name, () => openFile(agent.key, name, viewer), { class: 'secondary', data: { 'file-name': name } })));
      const tools = h('div', { id: 'agent-tools', 'aria-busy': 'true' }, h('p', { class: 'muted' }, 'Loading tools…'));
      detail.replaceChildren(h('h2', {}, agent.key), h('p', { class: 'muted' }, 'Created ' + T.fmtTime(agent.created_at)),
        h('h3', {}, 'Context files'), files, viewer, h('h3', {}, 'Tools'), tools);
      loadTools(agent.key, tools);
    }

    async function openFile(key, name, viewer) {
      viewer.replaceChildren(h('p', { class: 'muted' }, 'Loading…'));
      try {
        const f = await api('GET', '/v1/agents/' + enc(key) + '/files/' + enc(name));
        if (selected !== key) return;
        viewer.replaceChildren(h('div', { class: 'label' }, f.name || name), block(f.content, 'block file'));
      } catch (e) {
        viewer.replaceChildren(errorBox(e));
      }
    }

    load();
  }

  async function loadTools(agent, box) {
    try {
      const data = await api('GET', '/v1/tools', { query: { agent } });
      const tools = list(data && data.tools);
      box.replaceChildren(h('p', { class: 'muted' }, tools.length + ' tool(s) offered to this agent'),
        ...tools.map(toolRow));
    } catch (e) {
      box.replaceChildren(errorBox(e));
    }
    box.setAttribute('aria-busy', 'false');
  }

  function toolRow(t) {
    const a = t.annotations || {};
    const hints = [a.readOnlyHint && badge('read-only', 'good'), a.destructiveHint && badge('destructive', 'bad'),
      a.openWorldHint && badge('open world', '')];
    return h('details', { class: 'tool', data: { 'tool-name': t.name } },
      h('summary', {}, h('code', { class: 'tool-name' }, t.name), ' ', hints, ' ',
        h('span', { class: 'muted' }, T.oneLine(String(t.description || '').split('\n')[0], 140))),
      block(t.description || '', 'block prose'), h('div', { class: 'label' }, 'Input schema'),
      block(pretty(t.inputSchema || {}), 'block args'));
  }

  // ---------------------------------------------------------------------------------------
  // Teams: each team's lead and members, and the viewed user's board, redrawn on `team` events.

  page({ name: 'teams', title: 'Teams', render: renderTeams });

  function renderTeams(root) {
    const listBox = h('div', { id: 'team-list', class: 'list', 'aria-busy': 'true' });
    const detail = h('section', { id: 'team-detail', class: 'detail' },
      h('p', { class: 'muted' }, 'Select a team to see its members and its board.'));
    root.append(h('div', { class: 'split' }, listBox, detail));
    let selected = null;
    let board = null;

    async function load() {
      try {
        const data = await api('GET', '/v1/teams');
        const teams = list(data && data.teams);
        listBox.replaceChildren(...teams.map((t) => button([
          h('span', { class: 'row-title' }, t.name),
          h('span', { class: 'row-meta' }, 'lead ', t.lead, ' · ', list(t.members).length + ' member(s)'),
        ], () => select(t), { class: 'row', data: { 'team-name': t.name } })));
        if (!teams.length) listBox.append(h('p', { class: 'muted' }, 'No teams: `talon teams create` makes one.'));
      } catch (e) {
        listBox.replaceChildren(e.status === 404
          ? h('p', { class: 'muted' }, 'Not enabled on this gateway (/v1/teams answers 404).')
          : errorBox(e));
      }
      listBox.setAttribute('aria-busy', 'false');
    }

    function select(team) {
      selected = team.name;
      for (const row of listBox.querySelectorAll('[data-team-name]')) {
        row.classList.toggle('selected', row.getAttribute('data-team-name') === team.name);
      }
      board = h('div', { id: 'team-board', 'aria-busy': 'true' });
      detail.replaceChildren(h('h2', {}, team.name),
        team.description ? h('p', {}, team.description) : '',
        h('p', { class: 'muted' }, 'Lead: ', team.lead),
        h('h3', {}, 'Members'),
        table(['Agent', 'Role'], list(team.members).map((m) => h('tr', {}, h('td', {}, m.agent), h('td', {}, m.role)))),
        h('h3', {}, 'Board'), board);
      loadBoard();
    }

    async function loadBoard() {
      const name = selected;
      const box = board;
      if (!name || !box) return;
      try {
        const data = await api('GET', '/v1/teams/' + enc(name) + '/tasks', { query: { user: state.user, filter: 'all' } });
        if (selected !== name) return;
        const tasks = list(data && data.tasks);
        box.replaceChildren(tasks.length
          ? table(['#', 'Status', 'Priority', 'Subject', 'Owner', 'After', 'Result'], tasks.map(taskRow))
          : h('p', { class: 'muted' }, 'No tasks on this board for this user.'));
      } catch (e) {
        box.replaceChildren(errorBox(e));
      }
      box.setAttribute('aria-busy', 'false');
    }

    const refresh = debounce(loadBoard, 200);
    load();
    return {
      onEvent(ev) {
        if (ev.type === 'team' && ev.data && ev.data.team === selected) refresh();
      },
    };
  }

  function taskRow(t) {
    const kind = t.status === 'completed' ? 'good' : (t.status === 'failed' || t.status === 'cancelled') ? 'bad' : '';
    return h('tr', { data: { 'task-id': String(t.id), 'task-status': t.status } },
      h('td', {}, '#' + t.id), h('td', {}, badge(t.status, kind)), h('td', {}, String(t.priority)),
      h('td', {}, t.subject), h('td', {}, t.owner || ''),
      h('td', {}, list(t.blocked_by).map((id) => '#' + id).join(', ')),
      h('td', {}, T.oneLine(t.result || '', 200)));
  }

  // ---------------------------------------------------------------------------------------
  // MCP: bridged servers and their health, grants, access requests.

  page({ name: 'mcp', title: 'MCP', render: renderMcp });

  function renderMcp(root) {
    const servers = h('div', { id: 'mcp-servers' });
    const grants = h('div', { id: 'mcp-grants' });
    const requests = h('div', { id: 'mcp-requests' });
    const status = h('select', { id: 'request-status', on: { change: () => loadRequests() } },
      h('option', { value: 'pending' }, 'pending'), h('option', { value: '' }, 'all'));
    root.append(h('div', { class: 'toolbar' }, button('Refresh', () => loadAll(), { class: 'secondary' })),
      h('h2', {}, 'Servers'), servers, h('h2', {}, 'Grants'), grants,
      h('h2', {}, 'Access requests ', h('label', { class: 'inline' }, status)), requests);

    async function section(box, path, query, render) {
      try {
        box.replaceChildren(render(await api('GET', path, { query })));
      } catch (e) {
        box.replaceChildren(e.status === 404
          ? h('p', { class: 'muted', data: { disabled: 'true' } }, 'Not enabled on this gateway (' + path + ' answers 404).')
          : errorBox(e));
      }
    }

    const loadRequests = () => section(requests, '/v1/mcp-access-requests', { status: status.value }, requestTable);
    function loadAll() {
      section(servers, '/v1/mcp-servers', {}, serverTable);
      section(grants, '/v1/mcp-grants', {}, grantTable);
      loadRequests();
    }

    function requestTable(data) {
      const rows = list(data && data.requests);
      if (!rows.length) return h('p', { class: 'muted' }, 'No access requests.');
      return table(['#', 'Server', 'For', 'Tools', 'Reason', 'Requested', 'Status', 'Review'], rows.map((r) => {
        const note = h('input', { type: 'text', placeholder: 'Note (optional)', class: 'review-note' });
        const review = async (decision) => {
          try {
            await api('POST', '/v1/mcp-access-requests/' + enc(String(r.id)) + '/' + decision,
              { body: { note: note.value, reviewed_by: 'dashboard' } });
            notify('Request #' + r.id + ': ' + (decision === 'approve' ? 'approved' : 'rejected') + '.');
          } catch (e) {
            notify(e.message, 'error');
          }
          loadRequests();
          section(grants, '/v1/mcp-grants', {}, grantTable);
        };
        const action = r.status === 'pending'
          ? [note, button('Approve', () => review('approve'), { class: 'good', data: { decision: 'approve' } }),
            button('Reject', () => review('reject'), { class: 'danger', data: { decision: 'reject' } })]
          : [r.reviewed_by || '', r.review_note ? ': ' + r.review_note : '', ' ', T.fmtTime(r.reviewed_at)];
        return h('tr', { data: { 'request-id': String(r.id) } }, h('td', {}, String(r.id)), h('td', {}, r.server),
          h('td', {}, r.kind + ' ' + r.subject), h('td', {}, list(r.tools).length ? r.tools.join(', ') : 'all tools'),
          h('td', {}, block(r.reason || '', 'block prose')), h('td', {}, r.requested_by + ', ' + T.fmtTime(r.created_at)),
          h('td', {}, badge(r.status, 'state-' + r.status)), h('td', { class: 'actions' }, action));
      }));
    }

    loadAll();
  }

  function serverStatus(st, enabled) {
    if (!st) return badge(enabled === false ? 'disabled' : 'not bridged', '');
    const cls = st.state === 'connected' ? 'good' : st.state === 'connecting' ? '' : 'bad';
    return h('span', {}, badge(st.state, cls), st.attempt != null ? ' attempt ' + st.attempt : '',
      st.last_error ? h('div', { class: 'muted' }, T.oneLine(st.last_error, 300)) : '');
  }

  function serverTable(data) {
    const stored = list(data && data.servers);
    const live = data && data.bridged && typeof data.bridged === 'object' ? data.bridged : {};
    const configured = list(data && data.configured);
    const names = [...new Set([...stored.map((s) => s.name), ...configured, ...Object.keys(live)])];
    if (!names.length) return h('p', { class: 'muted' }, 'No MCP servers.');
    return table(['Name', 'Source', 'Transport', 'Runs', 'Flags', 'Status'], names.map((name) => {
      const s = stored.find((x) => x.name === name);
      const source = configured.includes(name) ? 'talon.toml' : s ? 'stored' : 'bridged';
      const target = !s ? '' : s.url ? s.url : [s.command, ...list(s.args)].filter((x) => x).map(shellWord).join(' ');
      const flags = !s ? '' : [s.enabled ? 'enabled' : 'disabled', s.required && 'required', s.require_grant && 'grant required']
        .filter((x) => x).join(', ');
      const secrets = s ? [list(s.env_names).length ? 'env: ' + s.env_names.join(', ') : '',
        list(s.header_names).length ? 'headers: ' + s.header_names.join(', ') : ''].filter((x) => x).join(' · ') : '';
      return h('tr', { data: { 'mcp-server': name } }, h('td', {}, h('b', {}, name)), h('td', {}, source),
        h('td', {}, s ? s.transport : ''), h('td', {}, h('code', {}, target), secrets ? h('div', { class: 'muted' }, secrets) : ''),
        h('td', {}, flags), h('td', {}, serverStatus(s ? s.status || live[name] : live[name], s && s.enabled)));
    }));
  }

  function grantTable(data) {
    const rows = list(data && data.grants);
    if (!rows.length) return h('p', { class: 'muted' }, 'No grants.');
    return table(['Server', 'For', 'Enabled', 'Allow', 'Deny', 'Granted by', 'Updated'], rows.map((g) =>
      h('tr', {}, h('td', {}, g.server), h('td', {}, g.kind + ' ' + g.subject), h('td', {}, g.enabled ? 'yes' : 'no'),
        h('td', {}, list(g.allow).length ? g.allow.join(', ') : 'all tools'), h('td', {}, list(g.deny).join(', ')),
        h('td', {}, g.granted_by), h('td', {}, T.fmtTime(g.updated_at)))));
  }

  // ---------------------------------------------------------------------------------------

  function start() {
    T.auth.onUnauthorized = () => {
      if (state.auth) logout('The gateway refused the token (401); log in again.');
    };
    $('login-form').addEventListener('submit', onLogin);
    $('logout').addEventListener('click', () => logout());
    $('view-user').addEventListener('change', onUserChange);
    window.addEventListener('hashchange', route);
    buildNav();
    const token = T.auth.token();
    api('GET', '/v1/models', { token: token || null }).then(
      () => enter(token ? 'token' : 'open'),
      (e) => {
        if (e.status === 401) {
          if (token) T.auth.setToken(null);
          showLogin(token ? 'The stored token was refused; log in again.' : '');
        } else {
          showLogin('Cannot reach the gateway: ' + e.message);
        }
      });
  }

  // Pages of later scripts (loaded with defer after this one) register before the start.
  T.page = page;
  document.addEventListener('DOMContentLoaded', start);
})();
