import { h, pretty, cost } from './dom.js';
import { renderDiff } from './diff.js';

// Pending tracks the permission questions a session is waiting on: raised
// by a clarification event without a decision, settled by the same id with
// one, voided when its turn ends or the session is released or orphaned.
export class Pending {
  constructor() { this.byId = new Map(); }

  apply(pe) {
    const ev = pe.event;
    switch (ev.type) {
      case 'clarification':
        if (ev.decision) this.byId.delete(ev.clarificationId);
        else this.byId.set(ev.clarificationId, { id: ev.clarificationId, turn: pe.turn, toolName: ev.toolName, input: ev.input, text: ev.text, seq: pe.seq });
        return true;
      case 'turn_end':
        for (const [id, p] of this.byId) if (p.turn <= pe.turn) this.byId.delete(id);
        return true;
      case 'released':
      case 'orphaned':
      case 'ended':
        this.byId.clear();
        return true;
    }
    return false;
  }

  get size() { return this.byId.size; }
  list() { return [...this.byId.values()]; }
}

// displayStatus is the record's status, or "waiting" when a live session
// has a question pending (the record has no such status of its own).
export function displayStatus(rec, pendingCount) {
  if (rec.status === 'waiting') return 'waiting';
  const live = rec.status === 'running' || rec.status === 'idle';
  return live && pendingCount > 0 ? 'waiting' : rec.status;
}

function shortInput(raw) {
  let v = raw;
  try { v = typeof raw === 'string' ? JSON.parse(raw) : raw; } catch { /* as is */ }
  if (v && typeof v === 'object') {
    const first = v.command ?? v.file_path ?? v.path ?? v.pattern ?? Object.values(v)[0];
    if (first !== undefined) return String(first).slice(0, 120);
  }
  return '';
}

// Feed renders a session's events in seq order, one element per event
// (streamed text deltas fill one block that the complete text replaces).
// An event whose seq it has shown already is dropped and counted: the
// stream should never send one twice.
export class Feed {
  // root holds the events; diffPane, when given, shows the latest turn's
  // diff beside them (the two-pane session view).
  constructor(root, stats, diffPane = null) {
    this.root = root;
    this.stats = stats;
    this.diffPane = diffPane;
    this.model = ''; // the concrete model the backend reported at its start
    this.seen = new Set();
    this.turns = new Map();
    this.tools = new Map();
    this.stream = null; // the open text block of streamed deltas
    this.pending = new Pending();
    this.lastSeq = 0;
  }

  section(turn) {
    let sec = this.turns.get(turn);
    if (!sec) {
      sec = h('section', { class: 'turn', dataset: { turn: String(turn) } },
        h('h3', {}, turn === 0 ? 'Session' : `Turn ${turn}`));
      this.turns.set(turn, sec);
      this.root.append(sec);
    }
    return sec;
  }

  // add renders one persisted event; it returns false for a duplicate. A
  // reader at the bottom of the feed stays there as events arrive.
  add(pe) {
    const r = this.root;
    const atBottom = r.scrollHeight - r.scrollTop - r.clientHeight < 60;
    const added = this.render(pe);
    if (added && atBottom) r.scrollTop = r.scrollHeight;
    return added;
  }

  render(pe) {
    this.stats.received.push(pe.seq);
    if (this.seen.has(pe.seq)) {
      this.stats.duplicates++;
      return false;
    }
    this.seen.add(pe.seq);
    if (pe.seq > this.lastSeq) this.lastSeq = pe.seq;
    this.pending.apply(pe);
    const ev = pe.event;
    const sec = this.section(pe.turn);
    const item = (cls, ...kids) => h('div', { class: `ev ${cls}`, dataset: { seq: String(pe.seq), type: ev.type } }, ...kids);
    if (ev.type !== 'text') this.stream = null;
    switch (ev.type) {
      case 'text': {
        if (ev.delta) {
          if (!this.stream || this.stream.turn !== pe.turn) {
            const el = h('div', { class: 'ev text streaming', dataset: { type: 'text-stream' } });
            sec.append(el);
            this.stream = { el, turn: pe.turn };
          }
          this.stream.el.append(document.createTextNode(ev.text || ''));
          return true;
        }
        if (this.stream && this.stream.turn === pe.turn) {
          const el = this.stream.el;
          el.textContent = ev.text || '';
          el.classList.remove('streaming');
          el.dataset.seq = String(pe.seq);
          el.dataset.type = 'text';
          this.stream = null;
          return true;
        }
        sec.append(item('text', ev.text || ''));
        return true;
      }
      case 'thinking':
        sec.append(item('thinking', h('details', {}, h('summary', {}, 'thinking'), h('p', {}, ev.text || ''))));
        return true;
      case 'tool_use': {
        const result = h('div', { class: 'tool-result muted' }, 'running…');
        const card = item('tool', h('details', {},
          h('summary', {}, h('span', { class: 'tool-name' }, ev.toolName || 'tool'), ' ', h('code', {}, shortInput(ev.input)), h('span', { class: 'tool-state' }, ' …')),
          h('div', { class: 'tool-body' }, h('div', { class: 'label' }, 'input'), h('pre', {}, pretty(ev.input)), result)));
        this.tools.set(ev.toolUseId || `seq${pe.seq}`, { card, result });
        sec.append(card);
        return true;
      }
      case 'tool_result': {
        const t = this.tools.get(ev.toolUseId);
        const body = [h('div', { class: 'label' }, ev.isError ? 'error' : 'result'), h('pre', {}, ev.output || '(no output)'),
          ev.truncated ? h('p', { class: 'muted' }, `truncated (${ev.originalBytes} bytes)`) : null];
        if (t) {
          t.result.replaceWith(h('div', { class: `tool-result${ev.isError ? ' err' : ''}`, dataset: { seq: String(pe.seq) } }, ...body));
          const st = t.card.querySelector('.tool-state');
          st.textContent = ev.isError ? ' ✗' : ' ✓';
          t.card.classList.add(ev.isError ? 'failed' : 'done');
        } else {
          sec.append(item('tool', h('details', {}, h('summary', {}, 'tool result'), ...body)));
        }
        return true;
      }
      case 'clarification':
        if (ev.decision) {
          sec.append(item('clar answered', `Answered ${ev.clarificationId}: ${ev.decision}`, ev.reason ? ` — ${ev.reason}` : ''));
        } else {
          sec.append(item('clar', h('strong', {}, 'Permission asked'), ` ${ev.toolName || ''} `, h('code', {}, shortInput(ev.input))));
        }
        return true;
      case 'turn_started':
        sec.append(item('turn-started', h('span', { class: 'label' }, 'sent'), ' ', ev.text || ''));
        return true;
      case 'guidance':
        sec.append(item('guidance', h('span', { class: 'label' }, `${ev.source || 'driver'} guidance${ev.mode ? ' (' + ev.mode + ')' : ''}`), ' ', ev.text || ''));
        return true;
      case 'posture':
        sec.append(item('note', `Posture → ${ev.posture}`));
        return true;
      case 'interrupt':
        sec.append(item('note', 'Interrupt requested'));
        return true;
      case 'turn_end':
        sec.append(item(`turn-end state-${ev.state}`, `Turn ${pe.turn} ${ev.state || 'ended'}`,
          ev.costUsd ? ` · ${cost(ev.costUsd)}` : '', ev.numTurns ? ` · ${ev.numTurns} agent turns` : ''));
        return true;
      case 'turn_diff':
        sec.append(item('turn-diff', renderDiff(ev.diff || {}, `d${pe.seq}`)));
        if (this.diffPane) {
          this.diffPane.replaceChildren(h('h3', {}, `Turn ${pe.turn} diff`), renderDiff(ev.diff || {}, `p${pe.seq}`));
          this.diffPane.dataset.turn = String(pe.turn);
        }
        return true;
      case 'started':
        if (ev.model) this.model = ev.model;
        sec.append(item('note', 'Backend session started', ev.model ? ` · model ${ev.model}` : '', ev.externalSessionId ? ` · id ${ev.externalSessionId}` : ''));
        return true;
      case 'warning':
        sec.append(item('warn', `warning: ${ev.text || ''}`));
        return true;
      case 'error':
        sec.append(item('err', `${ev.fatal ? 'fatal error' : 'error'}: ${ev.text || ''}`));
        return true;
      case 'ended':
        sec.append(item('note', `The agent ended the session${ev.text ? ': ' + ev.text : ''}`));
        return true;
      case 'released':
        sec.append(item('released', `Released (${ev.releaseReason || 'explicit'})`, ev.outcome ? ` · verdict ${ev.outcome}` : '', ev.note ? ` · ${ev.note}` : ''));
        return true;
      case 'orphaned':
        sec.append(item('warn', 'Orphaned: the process that drove it stopped before releasing it. Resume to continue.'));
        return true;
      case 'adopted':
        sec.append(item('note', 'Resumed: a new run adopted this record'));
        return true;
      case 'supervision':
        sec.append(item('warn', `supervision: ${ev.child || ''} ${ev.text || ''}`));
        return true;
      default:
        sec.append(item('note', `${ev.type}`));
        return true;
    }
  }
}
