// Workers: the processes crawling, from the live stream; stale ones marked.

import { emptyRow, h, num, seconds, table, timeEl } from '../dom.js';

const STALE_AFTER_S = 10; // the registry's own GONE_AFTER_S: ten missed beats

export function isStale(worker, now) {
  if (worker.state === 'gone') return true;
  return worker.last_heartbeat !== null && worker.last_heartbeat !== undefined
    && now - worker.last_heartbeat > STALE_AFTER_S;
}

function fillRow(tr, worker, now) {
  const stale = isStale(worker, now);
  const ago = worker.last_heartbeat
    ? ` (${seconds(Math.max(now - worker.last_heartbeat, 0))} ago)` : '';
  tr.dataset.stale = String(stale);
  tr.classList.toggle('stale', stale);
  tr.replaceChildren(
    h('th', { scope: 'row' }, worker.id),
    h('td', {}, stale ? h('span', { class: 'badge bad' }, `${worker.state} · stale`)
      : h('span', { class: `badge ${worker.state}` }, worker.state)),
    h('td', { class: 'url' }, worker.current_url ?? '—'),
    h('td', {}, num(worker.pages)),
    h('td', {}, seconds(worker.uptime_s)),
    h('td', {}, timeEl(worker.last_heartbeat), ago));
}

export function mount(ctx) {
  const { box, body } = table('workers-table',
    ['Worker', 'State', 'Current URL', 'Pages', 'Up', 'Last heartbeat'], 'Workers');
  emptyRow(body, 6, 'Waiting for the live stream…');
  const rows = new Map(); // id → its row: updated in place, so focus and selection stay
  ctx.main.append(h('h1', {}, 'Workers'), h('div', { class: 'panel' }, box));
  return {
    update(snapshot) {
      const workers = snapshot.workers || [];
      if (!workers.length) {
        emptyRow(body, 6, 'No worker.');
        return;
      }
      const wanted = workers.map((worker) => {
        const tr = rows.get(worker.id) ?? h('tr', { 'data-worker-id': worker.id });
        rows.set(worker.id, tr);
        fillRow(tr, worker, snapshot.at);
        return tr;
      });
      if (wanted.length !== body.children.length || wanted.some((tr, i) => body.children[i] !== tr)) {
        body.replaceChildren(...wanted);
      }
    },
  };
}
