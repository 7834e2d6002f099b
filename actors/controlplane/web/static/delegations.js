// The delegations view (#/d): every driver dispatched, live and past, each
// linking to the sessions it drove (#/s/<id>).
import { api, describe } from './api.js';
import { h, clear, age } from './dom.js';

export function delegationsView(view, state) {
  state.view = 'delegations';
  const body = h('tbody', { id: 'delegations-body' });
  const msg = h('p', { class: 'notice', id: 'delegations-notice' });
  clear(view).append(
    h('div', { class: 'toolbar' }, h('h2', {}, 'Delegations')),
    msg,
    h('table', { class: 'sessions' },
      h('thead', {}, h('tr', {}, ...['delegation', 'state', 'agent', 'backend', 'sessions', 'age'].map((c) => h('th', {}, c)))),
      body));
  async function load() {
    try {
      const data = await api('GET', '/api/delegations');
      clear(body);
      for (const d of data.delegations) {
        const links = (d.sessions || []).map((sid) => h('div', {},
          h('a', { href: `#/s/${sid}`, class: 'sid', dataset: { sid } }, sid.slice(0, 14)),
          d.verdicts && d.verdicts[sid] ? h('span', { class: 'muted' }, ` ${d.verdicts[sid]}`) : null));
        body.append(h('tr', { dataset: { delegation: d.id, state: d.state } },
          h('td', {}, h('span', { class: 'sid' }, d.id), h('div', { class: 'brief' }, (d.brief || '').slice(0, 140)),
            d.report ? h('div', { class: 'muted' }, d.report.slice(0, 200)) : null),
          h('td', {}, h('span', { class: `badge status-${d.state}` }, d.state)),
          h('td', {}, d.agent),
          h('td', {}, (d.constraints && d.constraints.backend) || 'any'),
          h('td', {}, ...(links.length ? links : ['—'])),
          h('td', {}, age(d.createdAt))));
      }
      if (!data.delegations.length) body.append(h('tr', {}, h('td', { colspan: 6, class: 'muted empty' }, 'No delegations yet: codesession delegate BRIEF')));
      state.ready = true;
    } catch (e) {
      msg.textContent = `Cannot list the delegations: ${describe(e)}`;
    }
  }
  load();
  const tick = setInterval(load, 3000);
  return () => clearInterval(tick);
}
