// The console: a hash router over three views (the session list, a
// session, the start form). Everything the views show comes from the
// control plane's /api routes and its SSE feed.
import { api, describe } from './api.js';
import { EventStream } from './sse.js';
import { h, clear, age, spend, overBudget, pretty } from './dom.js';
import { Feed, Pending, displayStatus } from './feed.js';
import { delegationsView } from './delegations.js';
import { provisionFacts, approvalsView } from './approvals.js';

const POSTURES = ['plan', 'default', 'acceptEdits', 'full'];
const EFFORTS = ['low', 'medium', 'high', 'max'];
const LIVE = (s) => s === 'running' || s === 'idle' || s === 'waiting'; // waiting: the API's running-with-a-question
const TWO_DRIVERS = 'The session is still live: attaching from a terminal now means two drivers on one session. Stop it (or let it end) before you resume it by hand.';

// window.codesession is what the browser tests read: the current view and
// the feed's counters (every seq received, duplicates dropped, reconnects).
const state = window.codesession = { view: '', stats: { received: [], duplicates: 0, reconnects: 0 }, ready: false };

const view = document.getElementById('view');
const conn = document.getElementById('conn');
let current = null; // the view's teardown

function setConn(s, detail) {
  conn.textContent = s === 'live' ? '● live' : s === 'reconnecting' ? '◌ reconnecting' : '○ ' + s;
  conn.className = `conn conn-${s}`;
  conn.title = detail || '';
  conn.dataset.state = s;
}

let backendsCache = null;
function backends() {
  backendsCache ??= api('GET', '/api/backends').then((r) => r.backends || []).catch((e) => { backendsCache = null; throw e; });
  return backendsCache;
}

function notice(el, msg, kind = 'info') {
  el.textContent = msg;
  el.className = `notice ${kind}`;
}

function statusBadge(s) {
  return h('span', { class: `badge status-${s}`, dataset: { status: s } }, s);
}

// ---- the session list ------------------------------------------------------

function listView() {
  state.view = 'list';
  const recs = new Map();
  const pend = new Map(); // sid -> Pending
  // sid -> the live events seen since the page loaded (the last 256), so a
  // Pending rebuilt from the store's tail keeps what the feed brought while
  // the tail was being read (else a question raised then was lost, and the
  // row never said waiting)
  const recent = new Map();
  const filters = { status: 'all', backend: 'all', q: '' };
  const body = h('tbody', { id: 'sessions-body' });
  const backendSel = h('select', { id: 'filter-backend', onchange: (e) => { filters.backend = e.target.value; render(); } }, h('option', { value: 'all' }, 'all backends'));
  const msg = h('p', { class: 'notice', id: 'list-notice' });
  clear(view).append(
    h('div', { class: 'toolbar' },
      h('h2', {}, 'Sessions'),
      h('label', {}, 'status ', h('select', { id: 'filter-status', onchange: (e) => { filters.status = e.target.value; render(); } },
        ...['all', 'live', 'waiting', 'running', 'idle', 'ended', 'failed', 'orphaned'].map((s) => h('option', { value: s }, s)))),
      h('label', {}, 'backend ', backendSel),
      h('input', { type: 'search', id: 'filter-q', placeholder: 'filter by brief or id', oninput: (e) => { filters.q = e.target.value.toLowerCase(); render(); } }),
      h('a', { href: '#/new', class: 'button' }, 'New session'),
      h('a', { href: '#/approvals', id: 'approvals-link' }, 'Approvals')),
    msg,
    h('table', { class: 'sessions' },
      h('thead', {}, h('tr', {}, ...['session', 'status', 'backend', 'model', 'posture', 'rounds', 'cost', 'age'].map((c) => h('th', {}, c)))),
      body));

  const pendingOf = (sid) => { let p = pend.get(sid); if (!p) pend.set(sid, p = new Pending()); return p; };

  function render() {
    const seenBackends = new Set([...recs.values()].map((r) => r.backendId));
    const have = new Set([...backendSel.options].map((o) => o.value));
    for (const b of seenBackends) if (!have.has(b)) backendSel.append(h('option', { value: b }, b));
    const rows = [...recs.values()].sort((a, b) => Date.parse(b.createdAt) - Date.parse(a.createdAt));
    const short = shortIds(rows.map((r) => r.sessionId));
    clear(body);
    let shown = 0;
    for (const r of rows) {
      const st = displayStatus(r, pend.get(r.sessionId)?.size || 0);
      if (filters.status === 'live' ? !LIVE(r.status) : filters.status !== 'all' && st !== filters.status) continue;
      if (filters.backend !== 'all' && r.backendId !== filters.backend) continue;
      if (filters.q && !(r.taskBrief || '').toLowerCase().includes(filters.q) && !r.sessionId.includes(filters.q)) continue;
      shown++;
      body.append(h('tr', { dataset: { sid: r.sessionId, status: st } },
        h('td', {}, h('a', { href: `#/s/${r.sessionId}`, class: 'sid', title: r.sessionId }, short.get(r.sessionId)), h('div', { class: 'brief' }, (r.taskBrief || '').slice(0, 140))),
        h('td', {}, statusBadge(st), r.outcome ? h('span', { class: 'muted' }, ` ${r.outcome}`) : null),
        h('td', {}, r.backendId),
        h('td', {}, r.model || '—', r.effort ? h('span', { class: 'muted' }, ` @${r.effort}`) : null),
        h('td', {}, h('span', { class: `badge posture-${r.posture}` }, r.posture || '—'), h('span', { class: 'muted' }, ` ≤ ${r.maxPosture || '?'}`)),
        h('td', {}, `${r.roundsElapsed || 0}${r.maxRounds ? ' / ' + r.maxRounds : ''}`),
        h('td', { class: 'spend', dataset: { budget: r.maxCostUsd || '', over: overBudget(r.costUsd, r.maxCostUsd) ? 'yes' : '' } },
          spend(r.costUsd, r.maxCostUsd), overBudget(r.costUsd, r.maxCostUsd) ? h('span', { class: 'badge warn' }, 'budget reached') : null),
        h('td', { class: 'age', dataset: { created: r.createdAt } }, age(r.createdAt))));
    }
    if (!shown) body.append(h('tr', {}, h('td', { colspan: 8, class: 'muted empty' }, recs.size ? 'No session matches the filters.' : 'No sessions yet. Start one.')));
  }

  // a live session's pending question is near the end of its log: read the
  // tail once; the live feed keeps it current from then on
  async function primePending(r) {
    try {
      const head = await api('GET', `/api/code-sessions/${r.sessionId}?limit=1`);
      const after = Math.max(0, head.lastSeq - 64);
      const tail = await api('GET', `/api/code-sessions/${r.sessionId}?afterSeq=${after}&limit=64`);
      const p = new Pending();
      let last = 0;
      for (const pe of tail.events) { p.apply(pe); last = pe.seq; }
      for (const pe of recent.get(r.sessionId) || []) if (pe.seq > last) p.apply(pe);
      pend.set(r.sessionId, p);
      render();
    } catch { /* the row shows the record's own status */ }
  }

  let reloading = null;
  async function load() {
    try {
      const data = await api('GET', '/api/code-sessions');
      recs.clear();
      for (const r of data.sessions) recs.set(r.sessionId, r);
      notice(msg, '');
      render();
      await Promise.all(data.sessions.filter((r) => LIVE(r.status)).map(primePending));
      state.ready = true;
    } catch (e) {
      notice(msg, `Cannot list the sessions: ${describe(e)}`, 'error');
    }
  }
  function reload() {
    reloading ??= setTimeout(() => { reloading = null; load(); }, 200);
  }

  const stream = new EventStream('/api/events?topics=code_session_event,code_session_changed', {
    onState: (s, d) => {
      setConn(s, d);
      if (s === 'reconnecting') state.stats.reconnects++;
      if (s === 'live' && state.stats.reconnects) reload(); // the list feed has no cursor: read the list again
    },
    onEvent: (name, data) => {
      const d = JSON.parse(data);
      if (name === 'code_session_changed') {
        recs.set(d.sessionId, d.record);
        render();
      } else if (name === 'code_session_event') {
        const seen = recent.get(d.sessionId) || [];
        seen.push(d);
        if (seen.length > 256) seen.shift();
        recent.set(d.sessionId, seen);
        if (!recs.has(d.sessionId)) reload();
        if (pendingOf(d.sessionId).apply(d)) render();
      }
    },
  }).start();
  load();
  const tick = setInterval(() => body.querySelectorAll('td.age').forEach((td) => { td.textContent = age(td.dataset.created); }), 5000);
  return () => { stream.close(); clearInterval(tick); };
}

// ---- one session -----------------------------------------------------------

function sessionView(sid) {
  state.view = 'session';
  state.stats = { received: [], duplicates: 0, reconnects: 0 };
  let rec = null;
  let postureEvent = null; // the latest durable posture event: { posture, at }
  let postureChoice = null; // the posture picked in the select and not yet applied
  // take adopts a record from the API or the feed unless it is older than
  // the one shown (a GET answered before a change can arrive after the
  // feed's newer record), keeping the posture of a later posture event.
  function take(r) {
    const at = Date.parse(r.updatedAt);
    if (rec && at < Date.parse(rec.updatedAt)) return false;
    rec = postureEvent && at < postureEvent.at && r.posture !== postureEvent.posture ? { ...r, posture: postureEvent.posture } : r;
    if (postureChoice === rec.posture) postureChoice = null;
    return true;
  }
  // rendered skips a rebuild of el when what it would show is unchanged:
  // a rebuild replaces the nodes under the user's cursor (a click lands on
  // a detached button, a half-typed deny reason or a picked posture is
  // lost).
  function rendered(el, key) {
    const k = JSON.stringify(key);
    if (el.dataset.key === k) return true;
    el.dataset.key = k;
    return false;
  }
  let backendList = [];
  const descriptorOf = () => backendList.find((b) => b.descriptor.id === rec?.backendId)?.descriptor || null;
  let descriptor = null;
  const feedEl = h('div', { class: 'feed', id: 'feed' });
  const diffPane = h('div', { class: 'diff-pane', id: 'diff-pane' }, h('p', { class: 'muted' }, 'The latest turn\'s diff shows here.'));
  const feed = new Feed(feedEl, state.stats, diffPane);
  state.feed = feed;
  const head = h('div', { class: 'session-head', id: 'session-head' });
  const attachRow = h('div', { class: 'attach', id: 'attach', hidden: true });
  const pendingBox = h('div', { id: 'pending' });
  const controls = h('div', { class: 'controls', id: 'controls' });
  const msg = h('p', { class: 'notice', id: 'session-notice' });
  // two panes: the feed beside the latest diff, above the controls
  clear(view).append(h('p', {}, h('a', { href: '#/' }, '← sessions')), head, pendingBox, msg,
    h('div', { class: 'panes', id: 'panes' }, h('div', { class: 'pane' }, h('h2', {}, 'Events'), feedEl), h('div', { class: 'pane' }, h('h2', {}, 'Diff'), diffPane)),
    controls, attachRow);

  async function act(what, fn) {
    notice(msg, `${what}…`);
    try {
      await fn();
      notice(msg, `${what}: done`, 'ok');
      return true;
    } catch (e) {
      notice(msg, `${what} failed: ${describe(e)}`, 'error');
      return false;
    }
  }

  function renderHead() {
    if (!rec) return;
    const st = displayStatus(rec, feed.pending.size);
    announce(rec, st);
    const chosen = postureChoice ?? rec.posture;
    if (rendered(head, [rec, st, chosen, descriptor?.scripted, descriptor?.liveControls?.setPosture, age(rec.createdAt), feed.model])) return;
    const postureSel = h('select', { id: 'posture-select', disabled: !LIVE(rec.status) || (descriptor && !descriptor.liveControls?.setPosture),
      onchange: (e) => { postureChoice = e.target.value; } },
      ...POSTURES.map((p) => h('option', { value: p, selected: p === chosen, disabled: POSTURES.indexOf(p) > POSTURES.indexOf(rec.maxPosture) }, p)));
    clear(head).append(
      h('h2', {}, 'Session ', h('code', { id: 'session-id' }, rec.sessionId), ' ', h('span', { id: 'session-status' }, statusBadge(st))),
      h('p', { class: 'brief-full' }, rec.taskBrief || ''),
      h('dl', { class: 'facts' },
        h('dt', {}, 'backend'), h('dd', {}, rec.backendId, descriptor?.scripted ? h('span', { class: 'badge warn' }, 'scripted') : null),
        h('dt', {}, 'model'), h('dd', { id: 'session-model' }, feed.model && feed.model !== rec.model ? `${feed.model}${rec.model ? ' (' + rec.model + ')' : ''}` : (rec.model || 'default'), rec.effort ? ` @ ${rec.effort}` : ''),
        h('dt', {}, 'posture'), h('dd', {}, h('span', { class: `badge posture-${rec.posture}`, id: 'posture-badge' }, rec.posture), h('span', { class: 'muted' }, ` ceiling ${rec.maxPosture}`), ' ',
          postureSel, h('button', { id: 'posture-set', disabled: postureSel.disabled, onclick: () => act('Set posture', () => api('POST', `/api/code-sessions/${sid}/posture`, { posture: postureSel.value })) }, 'Set')),
        h('dt', {}, 'rounds'), h('dd', {}, `${rec.roundsElapsed || 0}${rec.maxRounds ? ' of ' + rec.maxRounds : ''}`),
        h('dt', {}, 'cost'), h('dd', { id: 'session-cost' }, spend(rec.costUsd, rec.maxCostUsd), rec.maxCostUsd > 0 ? h('span', { class: 'muted' }, ' budget') : null,
          overBudget(rec.costUsd, rec.maxCostUsd) ? h('span', { class: 'badge warn', id: 'budget-reached' }, 'budget reached: stopped cleanly (max_budget)') : null),
        h('dt', {}, 'cwd'), h('dd', {}, h('code', {}, rec.cwd || '')),
        h('dt', {}, 'age'), h('dd', {}, age(rec.createdAt)),
        rec.outcome ? [h('dt', {}, 'verdict'), h('dd', {}, rec.outcome, rec.outcomeNote ? ` — ${rec.outcomeNote}` : '')] : null,
        provisionFacts(rec.provision)));
  }

  function renderPending() {
    const live = !!rec && LIVE(rec.status);
    if (rendered(pendingBox, [live, feed.pending.list()])) return;
    clear(pendingBox);
    if (!live) return;
    for (const p of feed.pending.list()) {
      const reason = h('input', { type: 'text', class: 'deny-reason', placeholder: 'reason for a deny (the agent sees it)' });
      const answer = (decision) => act(`Answer ${decision}`, () => api('POST', `/api/code-sessions/${sid}/answer`,
        { clarificationId: p.id, decision, ...(decision === 'deny' && reason.value ? { reason: reason.value } : {}) }));
      pendingBox.append(h('div', { class: 'pending', dataset: { clarification: p.id } },
        h('strong', {}, 'Permission asked: '), h('span', { class: 'tool-name' }, p.toolName || 'tool'),
        p.text ? h('p', {}, p.text) : null,
        h('pre', {}, pretty(p.input)),
        h('div', { class: 'buttons' },
          h('button', { class: 'allow', dataset: { decision: 'allow_once' }, onclick: () => answer('allow_once') }, 'Allow once'),
          h('button', { class: 'allow', dataset: { decision: 'allow_session' }, onclick: () => answer('allow_session') }, `Allow ${p.toolName || 'it'} for this session`),
          reason,
          h('button', { class: 'deny', dataset: { decision: 'deny' }, onclick: () => answer('deny') }, 'Deny'))));
    }
  }

  function renderControls() {
    if (!rec || rendered(controls, [LIVE(rec.status) || rec.status, descriptor?.liveControls])) return;
    clear(controls);
    if (LIVE(rec.status)) {
      const modes = ['queue', 'steer', 'interrupt'];
      const supported = (m) => m === 'queue' || !descriptor || (descriptor.liveControls?.guideModes || []).includes(m);
      const text = h('textarea', { id: 'guide-text', rows: 2, placeholder: 'guidance for the agent' });
      const mode = h('select', { id: 'guide-mode' }, ...modes.map((m) => h('option', { value: m, disabled: !supported(m) }, m + (supported(m) ? '' : ' (unsupported)'))));
      const verdict = h('select', { id: 'stop-verdict' }, h('option', { value: '' }, 'inferred verdict'), ...['success', 'partial', 'failed', 'aborted'].map((o) => h('option', { value: o }, o)));
      const note = h('input', { type: 'text', id: 'stop-note', placeholder: 'note (optional)' });
      controls.append(
        h('form', { class: 'guide', id: 'guide-form', onsubmit: async (e) => {
          e.preventDefault();
          if (!text.value.trim()) return;
          if (await act('Send guidance', () => api('POST', `/api/code-sessions/${sid}/guidance`, { text: text.value, mode: mode.value }))) text.value = '';
        } }, text, h('div', {}, h('label', {}, 'mode ', mode), h('button', { type: 'submit', id: 'guide-send' }, 'Send guidance'))),
        h('div', { class: 'row' },
          h('button', { id: 'interrupt', disabled: descriptor && !descriptor.liveControls?.interrupt, onclick: () => act('Interrupt', () => api('POST', `/api/code-sessions/${sid}/interrupt`, {})) }, 'Interrupt'),
          h('span', { class: 'spacer' }),
          verdict, note,
          h('button', { id: 'stop', class: 'deny', onclick: () => act('Stop', () => api('POST', `/api/code-sessions/${sid}/stop`, { ...(verdict.value ? { outcome: verdict.value } : {}), ...(note.value ? { note: note.value } : {}) })) }, 'Stop')));
    } else {
      const brief = h('input', { type: 'text', id: 'resume-brief', placeholder: 'what to do now (optional)' });
      controls.append(h('div', { class: 'row' }, h('span', { class: 'muted' }, `This session is ${rec.status}.`), brief,
        h('button', { id: 'resume', onclick: () => act('Resume', () => api('POST', `/api/code-sessions/${sid}/resume`, brief.value ? { brief: brief.value } : {})) }, 'Resume')));
    }
  }

  let attach = null;
  let copied = null; // what the copy button says once pressed, for the command it copied
  function renderAttach() {
    const live = !!rec && LIVE(rec.status);
    if (rendered(attachRow, [attach, live, copied])) return;
    attachRow.hidden = !attach;
    clear(attachRow);
    if (!attach) return;
    const cmd = h('code', { id: 'attach-command' }, attach.command);
    const said = (text) => { copied = { command: attach.command, text }; renderAttach(); };
    attachRow.append(h('span', { class: 'label' }, 'attach from a terminal'), ' ', cmd, ' ',
      h('button', { id: 'attach-copy', onclick: async () => {
        try { await navigator.clipboard.writeText(attach.command); said('Copied'); } catch {
          said('Selected: press Ctrl+C');
          getSelection().selectAllChildren(document.getElementById('attach-command'));
        }
      } }, copied?.command === attach.command ? copied.text : 'Copy'),
      attach.note ? h('p', { class: 'muted' }, attach.note) : null,
      live ? h('p', { class: 'caution', id: 'attach-caution' }, attach.caution || TWO_DRIVERS) : null);
  }

  function renderAll() { renderHead(); renderPending(); renderControls(); renderAttach(); }

  let refreshing = null;
  async function refresh() {
    try {
      const v = await api('GET', `/api/code-sessions/${sid}?limit=1`);
      const liveBefore = rec && LIVE(rec.status);
      if (!take(v.record)) return;
      const liveChanged = liveBefore !== LIVE(rec.status);
      attach = v.externalAttach || null;
      renderHead(); renderAttach(); renderPending();
      if (liveChanged) renderControls();
    } catch (e) {
      notice(msg, `Cannot read the session: ${describe(e)}`, 'error');
    }
  }
  const refreshSoon = () => { refreshing ??= setTimeout(() => { refreshing = null; refresh(); }, 300); };

  backends().then((bs) => {
    backendList = bs;
    descriptor = descriptorOf();
    renderAll();
  }).catch(() => {});

  let stream = null;
  refresh().then(() => {
    if (!rec) return;
    descriptor = descriptorOf();
    renderAll();
    stream = new EventStream(`/api/events?sessionId=${encodeURIComponent(sid)}`, {
      lastEventId: `${sid}:0`, // replay the whole log, then live
      onState: (s, d) => { setConn(s, d); if (s === 'reconnecting') state.stats.reconnects++; },
      onEvent: (name, data) => {
        const d = JSON.parse(data);
        if (name === 'code_session_event') {
          const before = feed.pending.size;
          feed.add(d);
          if (feed.pending.size !== before || d.event.type === 'clarification' || d.event.type === 'started') { renderPending(); renderHead(); }
          if (d.event.type === 'started') refreshSoon(); // the attach command needs the backend's id
          if (d.event.type === 'posture' && d.event.posture) {
            postureEvent = { posture: d.event.posture, at: Date.parse(d.at) };
            // an event older than the record is in it already (a replay)
            if (rec && rec.posture !== d.event.posture && !(postureEvent.at < Date.parse(rec.updatedAt))) {
              take({ ...rec, posture: d.event.posture }); // the durable event says it before the record refresh does
              renderHead(); renderControls();
            }
          }
        } else if (name === 'code_session_changed') {
          const liveBefore = LIVE(rec.status);
          if (!take(d.record)) return;
          const liveChanged = liveBefore !== LIVE(rec.status);
          renderHead(); renderPending();
          if (liveChanged) { renderControls(); refreshSoon(); }
          renderAttach();
        }
      },
    }).start();
    state.ready = true;
  });
  return () => stream?.close();
}

// ---- the start form --------------------------------------------------------

function newView() {
  state.view = 'new';
  const msg = h('p', { class: 'notice', id: 'new-notice' });
  const backendSel = h('select', { id: 'new-backend', name: 'backend', required: true }, h('option', { value: '' }, 'loading backends…'));
  const avail = h('p', { class: 'muted', id: 'backend-info' });
  const modelList = h('datalist', { id: 'model-classes' }, ...['cheap', 'standard', 'frontier'].map((c) => h('option', { value: c })));
  const effortSel = h('select', { id: 'new-effort', name: 'effort' }, h('option', { value: '' }, 'backend default'), ...EFFORTS.map((e) => h('option', { value: e }, e)));
  const posture = h('select', { id: 'new-posture', name: 'initialPosture' }, h('option', { value: '' }, 'default'), ...POSTURES.map((p) => h('option', { value: p }, p)));
  const maxPosture = h('select', { id: 'new-max-posture', name: 'maxPosture' }, h('option', { value: '' }, 'daemon default'), ...POSTURES.map((p) => h('option', { value: p }, p)));
  let list = [];
  const showBackend = () => {
    const b = list.find((x) => x.descriptor.id === backendSel.value);
    if (!b) { avail.textContent = ''; return; }
    const d = b.descriptor;
    avail.textContent = `${d.displayName}: ${b.availability.available ? 'available' : 'unavailable — ' + (b.availability.reason || '')}` +
      `${b.availability.version ? ' · ' + b.availability.version : ''} · effort ${d.effortSupport} · model ${d.modelSelection}` +
      `${d.scripted ? ' · scripted: no model is called' : ''}${(b.trackRecord || []).length ? ' · ' + b.trackRecord.join('; ') : ''}`;
    effortSel.disabled = d.effortSupport === 'none';
    clear(modelList).append(...['cheap', 'standard', 'frontier', ...Object.values(d.modelClassMap || {})].map((c) => h('option', { value: c })));
  };
  backends().then((bs) => {
    list = bs;
    clear(backendSel).append(...bs.map((b) => h('option', { value: b.descriptor.id, disabled: !b.availability.available },
      `${b.descriptor.displayName || b.descriptor.id} (${b.descriptor.id})${b.availability.available ? '' : ' — unavailable'}`)));
    const first = bs.find((b) => b.availability.available);
    if (first) backendSel.value = first.descriptor.id;
    showBackend();
    state.ready = true;
  }).catch((e) => notice(msg, `Cannot list the backends: ${describe(e)}`, 'error'));
  backendSel.addEventListener('change', showBackend);

  const form = h('form', { id: 'new-form', class: 'new', onsubmit: async (e) => {
    e.preventDefault();
    const f = new FormData(form);
    const body = { brief: f.get('brief'), backend: f.get('backend') };
    for (const k of ['cwd', 'agentModel', 'effort', 'initialPosture', 'maxPosture']) if (f.get(k)) body[k] = f.get(k);
    if (f.get('maxRounds')) body.maxRounds = Number(f.get('maxRounds'));
    if (f.get('maxCostUsd')) body.maxCostUsd = Number(f.get('maxCostUsd'));
    if (f.get('isolate')) body.isolate = 'worktree';
    notice(msg, 'Starting…');
    try {
      const res = await api('POST', '/api/code-sessions', body);
      location.hash = `#/s/${res.sessionId}`;
    } catch (err) {
      notice(msg, `Cannot start: ${describe(err)}`, 'error');
    }
  } },
  h('label', {}, 'Brief', h('textarea', { name: 'brief', id: 'new-brief', rows: 6, required: true, placeholder: 'what the agent should do' })),
  h('label', {}, 'Backend', backendSel), avail,
  h('label', {}, 'Working directory (absolute, on the daemon\'s machine)', h('input', { type: 'text', name: 'cwd', id: 'new-cwd', placeholder: '/path/to/repo', pattern: '/.*' })),
  h('div', { class: 'row' },
    h('label', {}, 'Model', h('input', { type: 'text', name: 'agentModel', id: 'new-model', list: 'model-classes', placeholder: 'backend default' }), modelList),
    h('label', {}, 'Effort', effortSel),
    h('label', {}, 'Posture', posture),
    h('label', {}, 'Ceiling', maxPosture),
    h('label', {}, 'Max rounds', h('input', { type: 'number', name: 'maxRounds', id: 'new-max-rounds', min: 1, placeholder: 'default' })),
    h('label', { title: 'once the backend\'s reported cost reaches it, the session stops cleanly (max_budget)' }, 'Budget (USD)',
      h('input', { type: 'number', name: 'maxCostUsd', id: 'new-max-cost', min: 0, step: 'any', placeholder: 'none' }))),
  h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'isolate', id: 'new-isolate', value: 'worktree' }),
    ' Isolate in a git worktree: the session works on a branch of its own beside the directory (which must be a git repository); prune removes the worktree and keeps the branch'),
  h('button', { type: 'submit', id: 'new-submit' }, 'Start session'));
  clear(view).append(h('h2', {}, 'New session'), msg, form);
  return () => {};
}

// shortIds cuts each id to the shortest prefix (at least 8 hex digits after
// cs_) unique among ids, as the CLI's table does; each is accepted wherever
// a SESSION is taken.
function shortIds(ids) {
  const sorted = [...ids].sort();
  const out = new Map();
  sorted.forEach((id, i) => {
    let n = 3 + 8;
    for (const j of [i - 1, i + 1]) {
      const o = sorted[j];
      if (!o || o === id) continue;
      let c = 0;
      while (c < id.length && c < o.length && id[c] === o[c]) c++;
      n = Math.max(n, c + 1);
    }
    out.set(id, id.slice(0, Math.min(n, id.length)));
  });
  return out;
}

// announce puts a waiting session in the page title and, when the browser
// allows it, raises a notification once each time the session starts
// waiting on a question (state.notified counts them for the tests).
let lastAnnounced = '';
function announce(rec, st) {
  const short = shortIds([rec.sessionId]).get(rec.sessionId);
  document.title = st === 'waiting' ? `(waiting) ${short} — codesession` : `${short} ${st} — codesession`;
  const key = `${rec.sessionId}:${st}`;
  if (st !== 'waiting' || lastAnnounced === key) { if (st !== 'waiting') lastAnnounced = key; return; }
  lastAnnounced = key;
  state.notified = (state.notified || 0) + 1;
  if ('Notification' in window && Notification.permission === 'granted') {
    try { new Notification('codesession: a session waits on you', { body: `${short}: ${(rec.taskBrief || '').slice(0, 120)}`, tag: rec.sessionId }); } catch (_) { /* not allowed here */ }
  }
}
if ('Notification' in window && Notification.permission === 'default') {
  document.addEventListener('click', () => { Notification.requestPermission().catch(() => {}); }, { once: true });
}

// ---- routing ---------------------------------------------------------------

function route() {
  current?.();
  current = null;
  state.ready = false;
  const hash = location.hash || '#/';
  let m;
  if ((m = hash.match(/^#\/s\/([A-Za-z0-9._-]+)$/))) current = sessionView(m[1]);
  else if (hash === '#/new') current = newView();
  else if (hash === '#/d') current = delegationsView(view, state);
  else if (hash === '#/approvals') current = approvalsView(view, state);
  else current = listView();
}

window.addEventListener('hashchange', route);
route();
