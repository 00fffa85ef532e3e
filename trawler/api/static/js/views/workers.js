// Workers: the processes crawling, from the live stream; stale ones marked.

import { emptyRow, h, num, seconds, table, timeEl } from '../dom.js';

const STALE_AFTER_S = 10; // the registry's own GONE_AFTER_S: ten missed beats

export function isStale(worker, now) {
  if (worker.state === 'gone') return true;
  return worker.last_heartbeat !== null && worker.last_heartbeat !== undefined
    && now - worker.last_heartbeat > STALE_AFTER_S;
}

export function mount(ctx) {
  const { box, body } = table('workers-table',
    ['Worker', 'State', 'Current URL', 'Pages', 'Up', 'Last heartbeat'], 'Workers');
  emptyRow(body, 6, 'Waiting for the live stream…');
  ctx.main.append(h('h1', {}, 'Workers'), h('div', { class: 'panel' }, box));
  return {
    update(snapshot) {
      const workers = snapshot.workers || [];
      if (!workers.length) {
        emptyRow(body, 6, 'No worker.');
        return;
      }
      body.replaceChildren(...workers.map((worker) => {
        const stale = isStale(worker, snapshot.at);
        const ago = worker.last_heartbeat ? ` (${seconds(Math.max(snapshot.at - worker.last_heartbeat, 0))} ago)` : '';
        return h('tr', { 'data-worker-id': worker.id, 'data-stale': String(stale),
          class: stale ? 'stale' : null },
        h('th', { scope: 'row' }, worker.id),
        h('td', {}, stale ? h('span', { class: 'badge bad' }, `${worker.state} · stale`)
          : h('span', { class: `badge ${worker.state}` }, worker.state)),
        h('td', { class: 'url' }, worker.current_url ?? '—'),
        h('td', {}, num(worker.pages)),
        h('td', {}, seconds(worker.uptime_s)),
        h('td', {}, timeEl(worker.last_heartbeat), ago));
      }));
    },
  };
}
