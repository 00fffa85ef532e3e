// The create-job form: the API's option names, checked here as the API checks them,
// and the API's own 422 `error` shown when it still refuses.

import { h } from '../dom.js';

const NUMBERS = {
  max_depth: { min: 0, integer: true, label: 'Max depth' },
  max_pages: { min: 1, integer: true, label: 'Max pages' },
  max_pages_per_host: { min: 1, integer: true, label: 'Max pages per host' },
  delay: { min: 0, integer: false, label: 'Delay (s)' },
};

function lines(text) {
  return text.split('\n').map((line) => line.trim()).filter(Boolean);
}

function checkSeeds(seeds) {
  if (!seeds.length) return ['seeds', 'at least one seed URL is needed'];
  for (const [index, seed] of seeds.entries()) {
    let url = null;
    try {
      url = new URL(seed);
    } catch {
      url = null;
    }
    if (!url || !['http:', 'https:'].includes(url.protocol) || !url.hostname) {
      return [`seeds.${index}`, `${JSON.stringify(seed.slice(0, 200))} is not an http(s) URL`];
    }
  }
  return null;
}

/** The request body, or [field, message] for the first bad field (as the API's 422). */
export function requestBody(form) {
  const data = new FormData(form);
  const seeds = lines(String(data.get('seeds') || ''));
  const bad = checkSeeds(seeds);
  if (bad) return { error: bad };
  const body = { seeds };
  for (const [name, rule] of Object.entries(NUMBERS)) {
    const raw = String(data.get(name) || '').trim();
    if (!raw) continue;
    const value = Number(raw);
    if (!Number.isFinite(value) || (rule.integer && !Number.isInteger(value))) {
      return { error: [name, `must be ${rule.integer ? 'a whole number' : 'a number'}`] };
    }
    if (value < rule.min) return { error: [name, `must be at least ${rule.min}`] };
    body[name] = value;
  }
  for (const name of ['include', 'exclude']) {
    const patterns = lines(String(data.get(name) || ''));
    for (const pattern of patterns) {
      try {
        new RegExp(pattern); // eslint-disable-line no-new
      } catch (error) {
        return { error: [name, `${JSON.stringify(pattern)} is not a valid regular expression`] };
      }
    }
    if (patterns.length) body[name] = patterns;
  }
  const scope = String(data.get('scope') || '');
  if (scope) body.scope = scope;
  const agent = String(data.get('user_agent') || '').trim();
  if (agent) body.user_agent = agent;
  if (data.get('allow_private')) body.allow_private = true;
  return { body };
}

function field(name, label, control, hint) {
  control.id = `job-${name}`;
  control.name = name;
  return h('div', { class: 'field' }, h('label', { for: control.id }, label), control,
    hint ? h('small', {}, hint) : null);
}

/** The form; onCreated(job) after the API accepts it. */
export function jobForm(ctx, onCreated) {
  const error = h('p', { class: 'form-error', 'data-testid': 'form-error', role: 'alert' });
  const scope = h('select', {}, [['', 'default (host)'], ['host', 'host'], ['domain', 'domain'],
    ['any', 'any']].map(([value, text]) => h('option', { value }, text)));
  const form = h('form', { id: 'job-form', novalidate: true, class: 'job-form' },
    field('seeds', 'Seed URLs (one a line)', h('textarea', { rows: 3, required: true })),
    h('div', { class: 'fields' },
      Object.entries(NUMBERS).map(([name, rule]) => field(name, rule.label,
        h('input', { type: 'number', inputmode: 'decimal', min: rule.min,
          step: rule.integer ? 1 : 'any' }))),
      field('scope', 'Scope', scope),
      field('user_agent', 'User agent', h('input', { type: 'text' }))),
    h('div', { class: 'check' }, h('input', { type: 'checkbox', id: 'job-allow_private',
      name: 'allow_private', value: 'yes' }),
    h('label', { for: 'job-allow_private' },
      'Allow loopback and private addresses (the server must run with --allow-private)')),
    h('div', { class: 'fields' },
      field('include', 'Include (regexes, one a line)', h('textarea', { rows: 2 })),
      field('exclude', 'Exclude (regexes, one a line)', h('textarea', { rows: 2 }))),
    error,
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Create job')));

  function show(name, message) {
    error.textContent = name ? `invalid ${name}: ${message}` : message;
    for (const control of form.querySelectorAll('[aria-invalid]')) {
      control.removeAttribute('aria-invalid');
    }
    const control = name && form.elements[name.split('.')[0]];
    if (control) {
      control.setAttribute('aria-invalid', 'true');
      control.focus();
    }
  }

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const { body, error: bad } = requestBody(form);
    if (bad) {
      show(...bad);
      return;
    }
    try {
      const job = await ctx.client.call('/api/v1/jobs', { method: 'POST', body });
      show(null, '');
      form.reset();
      onCreated(job);
    } catch (failure) {
      const loc = failure.body?.detail?.[0]?.loc;
      show(null, failure.message);
      if (Array.isArray(loc) && loc[1]) form.elements[String(loc[1])]?.focus();
    }
  });
  return form;
}
