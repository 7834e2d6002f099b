import { h } from './dom.js';

// renderDiff shows a turn's diff: the file list (status, path, +/-), then
// the unified diff line by line, each file's section anchored from the list.
export function renderDiff(diff, key) {
  const files = diff.files || [];
  const box = h('section', { class: 'diff', dataset: { source: diff.source || '' } });
  box.append(h('div', { class: 'diff-head' },
    h('strong', {}, 'Diff'), ' ', h('span', { class: 'muted' }, `${diff.source || 'none'} · ${diff.summary || ''}`),
    diff.truncated ? h('span', { class: 'badge warn' }, 'truncated') : null));
  if (diff.warning) box.append(h('p', { class: 'warn' }, `capture warning: ${diff.warning}`));
  if (files.length) {
    const list = h('ul', { class: 'diff-files' });
    files.forEach((f, i) => {
      list.append(h('li', {},
        h('span', { class: `fstat fstat-${f.status}` }, f.status),
        ' ',
        h('a', { href: `#${key}-f${i}`, class: 'diff-file', onclick: (e) => { e.preventDefault(); box.querySelector(`[data-file-index="${i}"]`)?.scrollIntoView({ block: 'start' }); } },
          f.oldPath ? `${f.oldPath} → ${f.path}` : f.path),
        f.binary ? h('span', { class: 'muted' }, ' binary') :
          h('span', { class: 'counts' }, ' ', h('span', { class: 'add' }, `+${f.insertions || 0}`), ' ', h('span', { class: 'del' }, `−${f.deletions || 0}`))));
    });
    if (diff.filesOmitted) list.append(h('li', { class: 'muted' }, `… and ${diff.filesOmitted} more files`));
    box.append(list);
  } else {
    box.append(h('p', { class: 'muted' }, 'No files changed.'));
  }
  if (diff.unifiedDiff) {
    const pre = h('pre', { class: 'unified' });
    let fileIndex = -1;
    for (const line of diff.unifiedDiff.split('\n')) {
      let cls = 'ctx';
      const attrs = {};
      if (line.startsWith('diff --git')) {
        cls = 'file';
        fileIndex++;
        attrs.dataset = { fileIndex: String(fileIndex) };
      } else if (line.startsWith('+++') || line.startsWith('---') || line.startsWith('index ') ||
        line.startsWith('new file') || line.startsWith('deleted file') || line.startsWith('rename ') || line.startsWith('similarity')) {
        cls = 'meta';
      } else if (line.startsWith('@@')) cls = 'hunk';
      else if (line.startsWith('+')) cls = 'add';
      else if (line.startsWith('-')) cls = 'del';
      attrs.class = `dl ${cls}`;
      pre.append(h('span', attrs, line + '\n'));
    }
    box.append(pre);
  } else if (files.length) {
    box.append(h('p', { class: 'muted' }, diff.source === 'tool-events' ? 'Paths only: the diff came from the agent\'s edit tools, not git.' : 'No unified diff was kept for this turn.'));
  }
  return box;
}
