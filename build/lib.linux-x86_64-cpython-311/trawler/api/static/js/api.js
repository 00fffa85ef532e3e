// The API client: the bearer token (asked once, kept for the browser session),
// JSON calls, and downloads (a plain link cannot carry the Authorization header).

const TOKEN_KEY = 'trawler.token';

export class ApiError extends Error {
  constructor(status, detail, body) {
    super(detail);
    this.status = status;
    this.body = body;
  }
}

/** The API's one-line reason: `error` of a 422, else `detail`. */
function reason(status, body) {
  if (body && typeof body.error === 'string') return body.error;
  if (body && typeof body.detail === 'string') return body.detail;
  return `HTTP ${status}`;
}

export class Client {
  constructor(dialog) {
    this.dialog = dialog;
    this.asking = null; // one dialog at a time, however many calls wait on it
  }

  get token() {
    return sessionStorage.getItem(TOKEN_KEY);
  }

  /** The token, asking for it first when there is none. */
  async ensureToken() {
    return this.token || this.askToken(false);
  }

  /** Shows the token dialog; resolves with what was saved. */
  askToken(wrong) {
    if (this.asking) return this.asking;
    if (wrong) sessionStorage.removeItem(TOKEN_KEY);
    const { dialog } = this;
    const input = dialog.querySelector('#token-input');
    dialog.querySelector('#token-why').classList.toggle('wrong', wrong);
    if (wrong) dialog.querySelector('#token-why').textContent = 'That token was refused: enter the server\u2019s API token.';
    input.value = '';
    this.asking = new Promise((resolve) => {
      const done = () => {
        const value = input.value.trim();
        if (!value) {
          dialog.showModal();
          return;
        }
        dialog.removeEventListener('close', done);
        sessionStorage.setItem(TOKEN_KEY, value);
        this.asking = null;
        resolve(value);
      };
      dialog.addEventListener('close', done);
      dialog.addEventListener('cancel', (event) => event.preventDefault(), { once: true });
    });
    dialog.showModal();
    input.focus();
    return this.asking;
  }

  async headers(extra = {}) {
    return { ...extra, Authorization: `Bearer ${await this.ensureToken()}` };
  }

  /** fetch() with the token; a 401 asks for the token again and retries. */
  async send(path, init = {}) {
    for (;;) {
      const response = await fetch(path, { ...init, headers: await this.headers(init.headers) });
      if (response.status !== 401) return response;
      await this.askToken(true);
    }
  }

  /** A JSON call: the answer's JSON, or an ApiError with the API's reason. */
  async call(path, { method = 'GET', body, query } = {}) {
    const url = query ? `${path}?${new URLSearchParams(clean(query))}` : path;
    const init = { method };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers = { 'Content-Type': 'application/json' };
    }
    const response = await this.send(url, init);
    const text = await response.text();
    let parsed = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = null;
    }
    if (!response.ok) throw new ApiError(response.status, reason(response.status, parsed), parsed);
    return parsed;
  }

  /** Saves what `path` answers as a file named `filename`. */
  async download(path, filename) {
    const response = await this.send(path);
    if (!response.ok) {
      const body = await response.json().catch(() => null);
      throw new ApiError(response.status, reason(response.status, body), body);
    }
    const url = URL.createObjectURL(await response.blob());
    const link = Object.assign(document.createElement('a'), { href: url, download: filename });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
  }
}

/** Query params without the empty ones. */
function clean(query) {
  return Object.fromEntries(
    Object.entries(query).filter(([, v]) => v !== null && v !== undefined && v !== ''),
  );
}
