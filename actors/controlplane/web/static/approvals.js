// Capability curation in the console (seed 000 §9): what a session was
// provisioned with, on its page, and the owner's approval requests for
// executable capabilities (#/approvals), approved or denied here.
import { api, describe } from './api.js';
import { h, clear, age } from './dom.js';

// provisionFacts are the session page's dt/dd rows for record.provision.
export function provisionFacts(p) {
  if (!p) return null;
  const tier = (id) => `${id} (${(p.tiers || {})[id] || '?'})`;
  const rows = [
    h('dt', {}, 'capabilities'),
    h('dd', { id: 'provision-detected' }, (p.capabilityIds || []).length ? p.capabilityIds.map(tier).join(', ') : 'none detected'),
  ];
  if ((p.applied || []).length) rows.push(h('dt', {}, 'provisioned'), h('dd', { id: 'provision-applied' }, p.applied.join(', ')));
  if ((p.awaitingApproval || []).length) {
    rows.push(h('dt', {}, 'awaiting approval'), h('dd', { id: 'provision-awaiting' },
      p.awaitingApproval.map((id) => `${id}: awaiting approval`).join(', '), ' ', h('a', { href: '#/approvals' }, 'review')));
  }
  if ((p.ignored || []).length) rows.push(h('dt', {}, 'not provisioned'), h('dd', {}, p.ignored.join(', ')));
  for (const n of p.tokenScopeNotes || []) rows.push(h('dt', {}, 'caution'), h('dd', { class: 'caution' }, n));
  return rows;
}

// approvalsView lists the approval requests with approve and deny buttons.
export function approvalsView(view, state) {
  state.view = 'approvals';
  const msg = h('p', { class: 'notice', id: 'approvals-notice' });
  const body = h('tbody', { id: 'approvals-body' });
  clear(view).append(h('p', {}, h('a', { href: '#/' }, '← sessions')), h('h2', {}, 'Capability approvals'),
    h('p', { class: 'muted' }, 'A T2/T3 capability runs code on this machine. Approving binds to its pinned identity: a pin bump asks again. ' +
      'A session never waits for a decision; the next session in the project picks an approved capability up.'),
    msg,
    h('table', { class: 'sessions' },
      h('thead', {}, h('tr', {}, ...['id', 'status', 'tier', 'identity', 'asked', 'projects', ''].map((c) => h('th', {}, c)))), body));
  async function decide(id, decision) {
    try {
      await api('POST', '/api/approvals', { id, decision });
      msg.textContent = `${id}: ${decision === 'approve' ? 'approved' : 'denied'}`;
      msg.className = 'notice ok';
      load();
    } catch (e) {
      msg.textContent = `${decision} failed: ${describe(e)}`;
      msg.className = 'notice error';
    }
  }
  async function load() {
    try {
      const data = await api('GET', '/api/approvals');
      clear(body);
      if (!data.approvals.length) body.append(h('tr', {}, h('td', { colspan: 7, class: 'muted empty' }, 'No approval requests.')));
      for (const a of data.approvals) {
        body.append(h('tr', { dataset: { id: a.id, status: a.status } },
          h('td', {}, h('code', {}, a.id), h('div', { class: 'brief' }, a.question || '')),
          h('td', {}, h('span', { class: `badge status-${a.status}` }, a.status)),
          h('td', {}, a.tier), h('td', {}, h('code', {}, a.identity)), h('td', {}, age(a.requestedAt)),
          h('td', {}, (a.projects || []).join(', ')),
          h('td', {}, a.status === 'approved' ? null : h('button', { class: 'approve', onclick: () => decide(a.id, 'approve') }, 'Approve'),
            a.status === 'denied' ? null : h('button', { class: 'deny', onclick: () => decide(a.id, 'deny') }, 'Deny'))));
      }
      state.ready = true;
    } catch (e) {
      msg.textContent = `Cannot list the approvals: ${describe(e)}`;
      msg.className = 'notice error';
    }
  }
  load();
  return () => {};
}
