import { parentPort, workerData } from 'node:worker_threads';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Agent, request } from 'undici';

/*
 * The soak's load, in a worker thread of its own: API reads, API edits and MCP tool calls, each at a
 * fixed rate (open loop: a slow answer does not slow the next request). Every `intervalMs` it posts
 * what each kind got (statuses, latencies) to the scenario; at the end, the article revisions its
 * edits were answered with (the webhooks the scenario must receive).
 */

export type SoakAccount = {
  apiKey: string;
  mcpToken: string;
  siteId: string;
  articles: Array<{ id: string; body: string }>;
};
export type SoakLoadData = {
  url: string;
  accounts: SoakAccount[];
  rates: { reads: number; edits: number; mcp: number };
  ms: number;
  intervalMs: number;
  /** Requests in flight beyond which a due request is skipped (and counted): the load never piles up unbounded. */
  maxInFlight: number;
};
export type KindInterval = { count: number; statuses: Record<string, number>; latencies: number[] };
export type IntervalReport = {
  type: 'interval';
  t: number;
  kinds: Record<string, KindInterval>;
  inFlight: number;
  skipped: number;
  failures: string[];
  /** Edits answered with a new revision so far (API and MCP). */
  acknowledged: number;
};
export type FinalReport = { type: 'done'; acknowledged: string[] };

const data = workerData as SoakLoadData;
const agent = new Agent({ connections: 64, pipelining: 1 });
const acknowledged: string[] = [];
let interval: Record<string, KindInterval> = {};
let failures: string[] = [];
let inFlight = 0;
let skipped = 0;

const note = (kind: string, status: string, ms: number): void => {
  const k = interval[kind] ?? { count: 0, statuses: {}, latencies: [] };
  interval[kind] = k;
  k.count++;
  k.statuses[status] = (k.statuses[status] ?? 0) + 1;
  k.latencies.push(Math.round(ms * 10) / 10);
};
const fail = (what: string): void => {
  if (failures.length < 5) failures.push(what);
};

const pick = <T>(items: readonly T[], n: number): T => items[n % items.length] as T;

async function api(kind: string, account: SoakAccount, method: 'GET' | 'PUT', path: string, body?: unknown) {
  const started = performance.now();
  try {
    const res = await request(`${data.url}/api/v1${path}`, {
      method,
      dispatcher: agent,
      headers: { authorization: `Bearer ${account.apiKey}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      headersTimeout: 30_000,
      bodyTimeout: 30_000,
    });
    const text = await res.body.text();
    note(kind, String(res.statusCode), performance.now() - started);
    if (res.statusCode >= 300) fail(`${method} ${path}: ${res.statusCode} ${text.slice(0, 200)}`);
    return res.statusCode === 200 ? (JSON.parse(text) as { id?: string; revision?: number }) : null;
  } catch (error) {
    note(kind, 'error', performance.now() - started);
    fail(`${method} ${path}: ${String(error)}`);
    return null;
  }
}

let reads = 0;
function read(): Promise<unknown> {
  const n = reads++;
  const account = pick(data.accounts, n);
  const article = pick(account.articles, n >> 2);
  switch (n % 4) {
    case 0:
      return api(
        'read',
        account,
        'GET',
        `/sites/${account.siteId}/articles?from=2000-01-01&to=2100-01-01&per_page=20`,
      );
    case 1:
      return api('read', account, 'GET', `/articles/${article.id}`);
    case 2:
      return api('read', account, 'GET', `/sites/${account.siteId}/backlinks?category=industry&per_page=20`);
    default:
      return api('read', account, 'GET', `/sites/${account.siteId}/stats?period=last_30_days`);
  }
}

let edits = 0;
async function edit(): Promise<void> {
  const n = edits++;
  const account = pick(data.accounts, n);
  const article = pick(account.articles, Math.floor(n / data.accounts.length));
  // A title every time; every tenth edit the body as well, alternately with one paragraph more.
  const body = n % 10 === 9 ? { body: n % 20 === 9 ? `${article.body}<p>Soak ${n}</p>` : article.body } : {};
  const answer = await api('edit', account, 'PUT', `/articles/${article.id}`, {
    title: `Soak ${n}`,
    ...body,
  });
  if (answer?.id && answer.revision) acknowledged.push(`${answer.id}:${answer.revision}`);
}

const mcpClients: Client[] = [];
let mcpCalls = 0;
async function mcp(): Promise<void> {
  const n = mcpCalls++;
  const which = n % data.accounts.length;
  const account = data.accounts[which] as SoakAccount;
  const client = mcpClients[which] as Client;
  const article = pick(account.articles, n >> 2);
  const calls: Array<[string, Record<string, unknown>]> = [
    ['get_stats', { site_id: account.siteId, period: 'last_30_days' }],
    ['list_articles', { site_id: account.siteId, from: '2000-01-01', to: '2100-01-01', per_page: 10 }],
    ['get_article', { article_id: article.id }],
    ['list_backlinks', { site_id: account.siteId, category: 'local', per_page: 10 }],
    ['update_article', { article_id: article.id, title: `Soak MCP ${n}` }],
  ];
  const [name, args] = calls[n % calls.length] as [string, Record<string, unknown>];
  const started = performance.now();
  try {
    const result = (await client.callTool({ name, arguments: args })) as {
      isError?: boolean;
      structuredContent?: { id?: string; revision?: number };
      content?: Array<{ text?: string }>;
    };
    note('mcp', result.isError ? 'tool_error' : 'ok', performance.now() - started);
    if (result.isError) fail(`${name}: ${result.content?.[0]?.text?.slice(0, 200)}`);
    else if (name === 'update_article') {
      const s = result.structuredContent;
      if (s?.id && s.revision) acknowledged.push(`${s.id}:${s.revision}`);
    }
  } catch (error) {
    note('mcp', 'error', performance.now() - started);
    fail(`${name}: ${String(error)}`);
  }
}

for (const account of data.accounts) {
  const client = new Client(
    { name: 'content-service-soak', version: '1.0.0' },
    { versionNegotiation: { mode: 'auto' } },
  );
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${data.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${account.mcpToken}` } },
    }),
  );
  mcpClients.push(client);
}

const kinds: Array<[number, () => Promise<unknown>]> = [
  [data.rates.reads, read],
  [data.rates.edits, edit],
  [data.rates.mcp, mcp],
];
const issued = kinds.map(() => 0);
const pending = new Set<Promise<unknown>>();
const started = performance.now();
/** Sends what happened since the last report, and starts the next interval. */
const sendReport = (): void => {
  parentPort?.postMessage({
    type: 'interval',
    t: Date.now(),
    kinds: interval,
    inFlight,
    skipped,
    failures,
    acknowledged: acknowledged.length,
  } satisfies IntervalReport);
  interval = {};
  failures = [];
  skipped = 0;
};
const report = setInterval(sendReport, data.intervalMs);
await new Promise<void>((resolve) => {
  const tick = setInterval(() => {
    const elapsed = performance.now() - started;
    if (elapsed >= data.ms) {
      clearInterval(tick);
      resolve();
      return;
    }
    kinds.forEach(([rate, run], i) => {
      const due = Math.floor((rate * elapsed) / 1000);
      while ((issued[i] as number) < due) {
        issued[i] = (issued[i] as number) + 1;
        if (inFlight >= data.maxInFlight) {
          skipped++;
          continue;
        }
        inFlight++;
        const p: Promise<unknown> = run().finally(() => {
          inFlight--;
          pending.delete(p);
        });
        pending.add(p);
      }
    });
  }, 5);
});
await Promise.all([...pending]);
clearInterval(report);
sendReport();
for (const client of mcpClients) await client.close();
await agent.close();
parentPort?.postMessage({ type: 'done', acknowledged } satisfies FinalReport);
