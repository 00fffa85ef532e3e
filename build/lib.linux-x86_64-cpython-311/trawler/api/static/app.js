// The dashboard's shell: theme, token, the live stream, and hash routes to views.
// Each view is mount(ctx, route) → { update(snapshot)?, unmount()? }.

import { Client } from './js/api.js';
import { LiveStream } from './js/live.js';
import * as admin from './js/views/admin.js';
import * as errors from './js/views/errors.js';
import * as hosts from './js/views/hosts.js';
import * as jobs from './js/views/jobs.js';
import * as overview from './js/views/overview.js';
import * as search from './js/views/search.js';
import * as urls from './js/views/urls.js';
import * as workers from './js/views/workers.js';

const VIEWS = { overview, jobs, hosts, workers, errors, search, urls, admin };
const THEME_KEY = 'trawler.theme';

function initialTheme() {
  const saved = localStorage.getItem(THEME_KEY);
  if (saved === 'light' || saved === 'dark') return saved;
  return matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light';
}

function setTheme(theme) {
  document.documentElement.dataset.theme = theme;
  const button = document.getElementById('theme-toggle');
  const other = theme === 'dark' ? 'light' : 'dark';
  button.textContent = theme === 'dark' ? 'Light theme' : 'Dark theme';
  button.setAttribute('aria-label', `Switch to the ${other} theme`);
}

/** '#/hosts/a.example?job=x' → {view: 'hosts', rest: ['a.example'], query}. */
export function parseRoute(hash) {
  const [path, query = ''] = hash.replace(/^#\/?/, '').split('?', 2);
  const [view, ...rest] = path.split('/').map(decodeURIComponent);
  return { view: VIEWS[view] ? view : 'overview', rest, query: new URLSearchParams(query) };
}

class Dashboard {
  constructor() {
    this.main = document.getElementById('main');
    this.client = new Client(document.getElementById('token-dialog'));
    this.status = document.querySelector('[data-testid=live-status]');
    this.problem = document.getElementById('live-problem');
    this.snapshot = null;
    this.current = null;
  }

  start() {
    setTheme(initialTheme());
    document.getElementById('theme-toggle').addEventListener('click', () => {
      const next = document.documentElement.dataset.theme === 'dark' ? 'light' : 'dark';
      localStorage.setItem(THEME_KEY, next);
      setTheme(next);
    });
    document.querySelector('.skip-link').addEventListener('click', (event) => {
      event.preventDefault(); // '#main' is not a route
      this.main.focus();
    });
    window.addEventListener('hashchange', () => this.route());
    this.route();
    const stream = new LiveStream(this.client, {
      snapshot: (body) => this.onSnapshot(body),
      problem: (detail) => this.showProblem(detail),
      status: (status) => this.setStatus(status),
    });
    stream.run();
  }

  route() {
    if (location.hash && !location.hash.startsWith('#/')) return; // an in-page anchor
    const route = parseRoute(location.hash);
    for (const link of document.querySelectorAll('.nav a')) {
      const here = link.getAttribute('href') === `#/${route.view}`;
      if (here) link.setAttribute('aria-current', 'page');
      else link.removeAttribute('aria-current');
    }
    this.current?.unmount?.();
    this.main.replaceChildren();
    const ctx = { client: this.client, main: this.main, snapshot: () => this.snapshot };
    this.current = VIEWS[route.view].mount(ctx, route);
    if (this.snapshot) this.current?.update?.(this.snapshot);
  }

  onSnapshot(body) {
    this.snapshot = body;
    this.problem.hidden = true;
    this.current?.update?.(body);
    this.status.dataset.at = String(body.at); // when the shown numbers were read
  }

  showProblem(detail) {
    this.problem.textContent = detail;
    this.problem.hidden = false;
  }

  setStatus(status) {
    if (this.status.textContent !== status) this.status.textContent = status;
    this.status.dataset.state = status;
  }
}

new Dashboard().start();
