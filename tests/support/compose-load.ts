/*
 * A steady load through the compose deployment's load balancer, for the tests that change the
 * deployment under it (scale-up, a rolling upgrade) and count what failed: every answer that is not
 * a 2xx, and every request that got no answer at all.
 *
 * Two lanes ask for the sign-in page, each one request every `pageIntervalMs` (a steady stream that
 * always has requests in flight, not a flood: the machine's cores stay shared with the rest of the
 * suite); each account given has a lane of its own that reads an article and edits its title in turn,
 * one request every `apiIntervalMs` (under the account's request budget a minute).
 */

export type LoadAccount = { apiKey: string; articleId: string };

export type LoadResult = { requests: number; failures: string[]; requestIds: string[] };

export type Load = {
  /** Requests answered so far. */
  readonly requests: number;
  stop(): Promise<LoadResult>;
};

export function startLoad(
  url: string,
  accounts: LoadAccount[],
  apiIntervalMs = 1_300,
  pageIntervalMs = 40,
): Load {
  let stopped = false;
  let requests = 0;
  const failures: string[] = [];
  const requestIds: string[] = [];

  const send = async (label: string, path: string, init: RequestInit = {}): Promise<void> => {
    const started = Date.now();
    try {
      const res = await fetch(`${url}${path}`, { ...init, signal: AbortSignal.timeout(60_000) });
      const body = await res.text();
      requests++;
      requestIds.push(res.headers.get('x-request-id') ?? '');
      if (res.status < 200 || res.status > 299) {
        failures.push(`${label} ${path}: ${res.status} ${body.slice(0, 300)}`);
      }
    } catch (err) {
      failures.push(
        `${label} ${path}: no answer after ${Date.now() - started} ms (${(err as Error).message})`,
      );
    }
  };

  /** Waits until `next` (a Date.now() value), unless the load has stopped. */
  const until = async (next: number): Promise<void> => {
    const wait = next - Date.now();
    if (wait > 0 && !stopped) await new Promise((r) => setTimeout(r, wait));
  };
  const pages = async (): Promise<void> => {
    while (!stopped) {
      const next = Date.now() + pageIntervalMs;
      await send('page', '/sign-in');
      await until(next);
    }
  };
  const api = async (account: LoadAccount, lane: number): Promise<void> => {
    const headers = { authorization: `Bearer ${account.apiKey}`, 'content-type': 'application/json' };
    for (let i = 0; !stopped; i++) {
      const next = Date.now() + apiIntervalMs;
      if (i % 2 === 0) await send('read', `/api/v1/articles/${account.articleId}`, { headers });
      else {
        await send('edit', `/api/v1/articles/${account.articleId}`, {
          method: 'PUT',
          headers,
          body: JSON.stringify({ title: `Under load ${lane}.${i}` }),
        });
      }
      await until(next);
    }
  };
  const lanes = [pages(), pages(), ...accounts.map((account, lane) => api(account, lane))];

  return {
    get requests() {
      return requests;
    },
    stop: async () => {
      stopped = true;
      await Promise.all(lanes);
      return { requests, failures, requestIds };
    },
  };
}
