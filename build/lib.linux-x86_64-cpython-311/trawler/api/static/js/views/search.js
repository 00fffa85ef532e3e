// Search: full-text over the crawled pages; the snippet's **marks** become <mark>.

import { h, num, timeEl } from '../dom.js';

/** 'a **b** c' → text and <mark> nodes (never HTML: the snippet is the page's text). */
export function snippetNodes(snippet) {
  return snippet.split('**').map((part, i) => (i % 2 ? h('mark', {}, part) : part));
}

function result(hit) {
  const href = `#/urls?url=${encodeURIComponent(hit.url)}&job=${encodeURIComponent(hit.job)}`;
  return h('li', { class: 'result' },
    h('a', { class: 'result-url', href }, hit.title || hit.url),
    h('div', { class: 'result-meta' }, h('span', { class: 'url' }, hit.url), ' · job ', hit.job,
      ' · fetched ', timeEl(hit.fetched_at)),
    h('p', { class: 'snippet' }, snippetNodes(hit.snippet)));
}

export function mount(ctx, route) {
  const input = h('input', { id: 'search-q', type: 'search', name: 'q', autocomplete: 'off',
    placeholder: 'words, "a phrase", -not, prefix*' });
  const total = h('p', { class: 'notice', role: 'status', 'data-testid': 'search-total' });
  const results = h('ol', { class: 'results', 'data-testid': 'search-results' });
  const form = h('form', { class: 'search', role: 'search' },
    h('label', { for: 'search-q' }, 'Search the crawled pages'), input,
    h('button', { type: 'submit' }, 'Search'));
  ctx.main.append(h('h1', {}, 'Search'), form, total, results);

  async function run(q) {
    if (!q.trim()) return;
    total.textContent = 'Searching…';
    try {
      const answer = await ctx.client.call('/api/v1/search', { query: { q, limit: 20 } });
      total.textContent = `${num(answer.total)} pages match`;
      results.replaceChildren(...answer.results.map(result));
    } catch (error) {
      total.textContent = error.message; // a 501 says why this server cannot search
      results.replaceChildren();
    }
  }

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    history.replaceState(null, '', `#/search?q=${encodeURIComponent(input.value)}`);
    run(input.value);
  });
  const q = route.query.get('q');
  if (q) {
    input.value = q;
    run(q);
  }
  return {};
}
