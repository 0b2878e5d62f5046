/** A response as the tests keep it: enough to check it against the OpenAPI document afterwards. */
export type Recorded = {
  method: string;
  path: string;
  status: number;
  headers: Record<string, string>;
  body: unknown;
};

/** fetch against a base URL that remembers every response, parsed. */
export function recordingClient(baseUrl: string) {
  const recorded: Recorded[] = [];
  async function call(
    method: string,
    path: string,
    opts: { key?: string; headers?: Record<string, string>; body?: unknown } = {},
  ): Promise<Recorded> {
    const headers: Record<string, string> = { ...(opts.headers ?? {}) };
    if (opts.key) headers.authorization = `Bearer ${opts.key}`;
    if (opts.body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`${baseUrl}${path}`, {
      method,
      headers,
      ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
    });
    const text = await res.text();
    const type = res.headers.get('content-type') ?? '';
    const body: unknown = text && type.includes('json') ? JSON.parse(text) : text;
    const r: Recorded = {
      method,
      path,
      status: res.status,
      headers: Object.fromEntries(res.headers.entries()),
      body,
    };
    recorded.push(r);
    return r;
  }
  return {
    recorded,
    call,
    get: (path: string, key?: string, headers?: Record<string, string>) =>
      call('GET', path, { ...(key ? { key } : {}), ...(headers ? { headers } : {}) }),
  };
}
