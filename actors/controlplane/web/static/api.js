// The control plane's JSON API, as the signed-in browser calls it: the
// session cookie goes along by itself (same origin), unsafe methods carry
// the page's CSRF token, and a 401 means the login has lapsed: reload, and
// the server answers with the login form.

const csrf = document.querySelector('meta[name="csrf-token"]')?.content || '';

export class APIError extends Error {
  constructor(status, err) {
    super(err?.message || `HTTP ${status}`);
    this.status = status;
    this.code = err?.code || 'internal';
    this.field = err?.field || '';
  }
}

export async function api(method, path, body) {
  const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
  if (method !== 'GET' && method !== 'HEAD') {
    init.headers['Content-Type'] = 'application/json';
    init.headers['X-CSRF-Token'] = csrf;
    init.body = JSON.stringify(body ?? {});
  }
  const res = await fetch(path, init);
  if (res.status === 401) {
    location.reload();
    throw new APIError(401, { code: 'unauthorized', message: 'signed out' });
  }
  let env;
  try {
    env = await res.json();
  } catch {
    throw new APIError(res.status, { message: `HTTP ${res.status}: not JSON` });
  }
  if (!env.ok) throw new APIError(res.status, env.error);
  return env.data;
}

// describe turns an error into one line for the page.
export function describe(err) {
  if (err instanceof APIError) return `${err.code}${err.field ? ' (' + err.field + ')' : ''}: ${err.message}`;
  return String(err?.message || err);
}
