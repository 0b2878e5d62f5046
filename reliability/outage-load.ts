import pg from 'pg';
import { cli } from '../tests/support/process.ts';

/*
 * The load and the answers the outage scenarios look at: a few clients reading and editing articles
 * through the API in a loop, each call bounded by a client-side timeout, every answer kept.
 */

/** One call as the client saw it. */
export type Answer = {
  at: number;
  method: 'GET' | 'PUT';
  status: number;
  ms: number;
  /** Content-Type, Retry-After and the body's text (problems only). */
  type: string;
  retryAfter: string | null;
  body: string;
  /** The title a PUT asked for (unique per call). */
  title?: string;
  /** The revision a 200 PUT answered. */
  revision?: number;
  articleId: string;
  /** The request id the service answered (X-Request-Id): its activity record's. */
  requestId?: string;
};

/** A client that gave up (the timeout) or never got an answer (status 0). */
export const NO_ANSWER = 0;

export type Seeded = { account_id: string; api_key: string; sites: Array<{ id: string }> };

/** `cli migrate` then `cli seed-demo --json` against `env`'s database. */
export async function migrateAndSeed(env: Record<string, string>, articles: number): Promise<Seeded> {
  const migrated = await cli(['migrate'], env);
  if (migrated.code !== 0) throw new Error(`migrate failed: ${migrated.stderr}`);
  const r = await cli(
    ['seed-demo', '--json', '--sites', '1', '--articles', String(articles), '--backlinks', '0'],
    env,
  );
  if (r.code !== 0) throw new Error(`seed-demo failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as Seeded;
}

/** Creates a database on the server `adminUrl` points at. */
export async function createDatabase(adminUrl: string, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
}

/** The ids of a site's articles, through the API. */
export async function articleIds(baseUrl: string, key: string, siteId: string): Promise<string[]> {
  const res = await fetch(
    `${baseUrl}/api/v1/sites/${siteId}/articles?from=2000-01-01&to=2100-01-01&per_page=100`,
    { headers: { authorization: `Bearer ${key}` } },
  );
  if (res.status !== 200) throw new Error(`listing articles answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { data: Array<{ id: string }> }).data.map((a) => a.id);
}

/** One API call with a client-side timeout; never throws (a timeout or a reset is status 0). */
async function call(
  baseUrl: string,
  key: string,
  method: 'GET' | 'PUT',
  articleId: string,
  timeoutMs: number,
  title?: string,
): Promise<Answer> {
  const started = performance.now();
  const at = Date.now();
  try {
    const res = await fetch(`${baseUrl}/api/v1/articles/${articleId}`, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      ...(title === undefined ? {} : { body: JSON.stringify({ title }) }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    const answer: Answer = {
      at,
      method,
      status: res.status,
      ms: performance.now() - started,
      type: res.headers.get('content-type') ?? '',
      retryAfter: res.headers.get('retry-after'),
      body: res.status >= 300 ? text : '',
      articleId,
      ...(title === undefined ? {} : { title }),
    };
    const requestId = res.headers.get('x-request-id');
    if (requestId) answer.requestId = requestId;
    if (method === 'PUT' && res.status === 200)
      answer.revision = (JSON.parse(text) as { revision: number }).revision;
    return answer;
  } catch (error) {
    return {
      at,
      method,
      status: NO_ANSWER,
      ms: performance.now() - started,
      type: '',
      retryAfter: null,
      body: String(error),
      articleId,
      ...(title === undefined ? {} : { title }),
    };
  }
}

export type Load = {
  answers: Answer[];
  /** Stops the clients and resolves when each has finished its call. */
  stop(): Promise<void>;
};

/**
 * `clients` loops, each alternating a read and an edit (a unique title; reads only with `edits: false`)
 * of a random article, with `pauseMs` between calls, until stopped.
 */
export function startLoad(opts: {
  baseUrl: string;
  key: string;
  articleIds: string[];
  clients: number;
  timeoutMs: number;
  pauseMs: number;
  label: string;
  /** false: reads only (default: reads and edits). */
  edits?: boolean;
}): Load {
  const answers: Answer[] = [];
  let running = true;
  let n = 0;
  const loop = async (client: number): Promise<void> => {
    const edits = opts.edits ?? true;
    let write = edits && client % 2 === 0;
    while (running) {
      const articleId = opts.articleIds[Math.floor(Math.random() * opts.articleIds.length)] as string;
      n += 1;
      const title = write ? `${opts.label} ${client}-${n}` : undefined;
      answers.push(
        await call(opts.baseUrl, opts.key, write ? 'PUT' : 'GET', articleId, opts.timeoutMs, title),
      );
      write = edits && !write;
      await new Promise((r) => setTimeout(r, opts.pauseMs));
    }
  };
  const loops = Array.from({ length: opts.clients }, (_, i) => loop(i));
  return {
    answers,
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

/** Polls `probe` every 100 ms until it holds; the milliseconds it took, or null past `timeoutMs`. */
export async function timeUntil(probe: () => Promise<boolean>, timeoutMs: number): Promise<number | null> {
  const started = performance.now();
  while (performance.now() - started < timeoutMs) {
    if (await probe().catch(() => false)) return Math.round(performance.now() - started);
    await new Promise((r) => setTimeout(r, 100));
  }
  return null;
}

/**
 * GET /readyz on a process's metrics listener (`metricsBase`: tests/support/server.ts's metricsBaseOf),
 * the detailed readiness: its status and body.
 */
export async function readiness(metricsBase: string): Promise<{ status: number; body: Readiness }> {
  const res = await fetch(`${metricsBase}/readyz`, { signal: AbortSignal.timeout(10_000) });
  return { status: res.status, body: (await res.json()) as Readiness };
}

/** GET /readyz on the public port, as a load balancer checks it: its status. */
export async function publicReadiness(baseUrl: string): Promise<number> {
  const res = await fetch(`${baseUrl}/readyz`, { signal: AbortSignal.timeout(10_000) });
  await res.arrayBuffer();
  return res.status;
}

/** What the outage scenarios read of the detailed /readyz. */
export type Readiness = {
  status: string;
  checks: {
    database: { ok: boolean; error?: string };
    projections: Array<{ name: string; lag: number }>;
    jobs: unknown;
  };
};

/**
 * Words of the database driver or server that must never reach a client, in the case they are written
 * in: the service's ids are lower case and hold `57p0` or `sql` now and then by chance.
 */
export const DRIVER_WORDS =
  /ECONN|[Tt]erminating connection|Connection terminated|database system is|57P0|timeout exceeded|pg_|[Pp]ostgres|SQL/;

/** Sleeps. */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
