import { mkdir, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { resolve } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { Agent, request } from 'undici';
import { cli } from '../tests/support/process.ts';
import { startServer } from '../tests/support/server.ts';

/*
 * `npm run bench:webhooks`: webhook delivery against the real server (PostgreSQL, BullMQ on Redis,
 * workers in the server process as `npm start` runs them) and a receiver on loopback.
 *
 * - Delay: 100 edits/s (title only, over 50 articles) for WEBHOOK_BENCH_SECONDS (15) with one endpoint
 *   subscribed to article.updated: from each edit's answer (its commit is before it) to the arrival of
 *   its message, p50/p99/max. Aim: p99 under 1 s.
 * - The API's own latency at 100 edits/s with the endpoint enabled and disabled, alternating (off, on,
 *   off, on), so that both are measured on the machine as it is at the time.
 * - Throughput: 3,000 edits sent as fast as the server answers (20 connections), then the time until
 *   the endpoint has all 3,000 messages: deliveries a second to one endpoint (one at a time, in order).
 */

const SECONDS = Number(process.env.WEBHOOK_BENCH_SECONDS || 15);
const RATE = 100;
const BURST = 3_000;
const log = (line: string): void => {
  process.stderr.write(`[bench webhooks] ${line}\n`);
};

const admin = 'postgres://postgres@127.0.0.1:5432/postgres';
const database = 'cs_bench_webhooks';
const databaseUrl = `postgres://postgres@127.0.0.1:5432/${database}`;
{
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  await client.query(`drop database if exists ${database} with (force)`);
  await client.query(`create database ${database}`);
  await client.end();
}
const prefix = `bench-wh-${process.pid}`;
const env = {
  DATABASE_URL: databaseUrl,
  REDIS_URL: process.env.REDIS_URL || 'redis://127.0.0.1:6379',
  JOBS_PREFIX: prefix,
  RATE_LIMIT_PER_MINUTE: '1000000000',
  EDIT_LIMIT_PER_DAY: '1000000000',
  OUTBOUND_ALLOW_NETWORKS: '127.0.0.1/32',
  LOG_LEVEL: 'info',
};
log('seeding 50 articles');
const seeded = await cli(
  ['seed-demo', '--json', '--sites', '1', '--articles', '50', '--backlinks', '0'],
  env,
);
if (seeded.code !== 0) throw new Error(seeded.stderr);
const account = JSON.parse(seeded.stdout) as { api_key: string; sites: Array<{ id: string }> };

// The receiver: answers 204 at once and notes when each (article, revision) arrived.
const arrivals = new Map<string, number>();
let received = 0;
const receiver = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const at = performance.now();
    received++;
    const message = JSON.parse(Buffer.concat(chunks).toString()) as {
      data: { id: string; revision: number };
    };
    arrivals.set(`${message.data.id}:${message.data.revision}`, at);
    res.writeHead(204).end();
  });
});
await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
const hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

const server = await startServer(env);
const agent = new Agent({ connections: 32 });
const call = async (method: string, path: string, body?: unknown) => {
  const res = await request(`${server.url}/api/v1${path}`, {
    method: method as 'GET',
    dispatcher: agent,
    headers: { authorization: `Bearer ${account.api_key}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.body.text();
  return { status: res.statusCode, json: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
};

const list = await call(
  'GET',
  `/sites/${account.sites[0]?.id}/articles?from=2000-01-01&to=2100-01-01&per_page=100`,
);
const articles = (list.json.data as Array<{ id: string }>).map((a) => a.id);
const hook = await call('POST', '/webhooks', { url: hookUrl, events: ['article.updated'] });
if (hook.status !== 201) throw new Error(`could not register the endpoint: ${JSON.stringify(hook.json)}`);
const hookId = hook.json.id as string;

type Edit = { key: string; answeredAt: number; latencyMs: number };
let counter = 0;
async function edit(): Promise<Edit | null> {
  const id = articles[counter % articles.length] as string;
  const title = `Bench title ${counter++}`;
  const started = performance.now();
  const r = await call('PUT', `/articles/${id}`, { title });
  const answeredAt = performance.now();
  if (r.status !== 200) return null;
  return { key: `${id}:${r.json.revision as number}`, answeredAt, latencyMs: answeredAt - started };
}

/** Edits at RATE a second for `seconds`, open loop (a slow answer does not slow the sending). */
async function paced(seconds: number): Promise<Edit[]> {
  const pending: Promise<Edit | null>[] = [];
  const start = performance.now();
  for (let i = 0; i < seconds * RATE; i++) {
    const due = start + (i * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    pending.push(edit());
  }
  return (await Promise.all(pending)).filter((e): e is Edit => e !== null);
}

const percentile = (values: number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
};
const round = (n: number): number => Math.round(n * 10) / 10;
const timing = (values: number[]) => ({
  n: values.length,
  p50_ms: round(percentile(values, 50)),
  p99_ms: round(percentile(values, 99)),
  max_ms: round(Math.max(...values)),
});

log('warm-up: 3 s at 100 edits/s');
await paced(3);
const latency: Record<'off' | 'on', number[]> = { off: [], on: [] };
const delays: number[] = [];
let missing = 0;
for (const state of ['off', 'on', 'off', 'on'] as const) {
  await call('PATCH', `/webhooks/${hookId}`, { enabled: state === 'on' });
  log(`${SECONDS} s at ${RATE} edits/s, endpoint ${state}`);
  const edits = await paced(SECONDS);
  latency[state].push(...edits.map((e) => e.latencyMs));
  if (state === 'on') {
    const deadline = performance.now() + 30_000;
    while (edits.some((e) => !arrivals.has(e.key)) && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    for (const e of edits) {
      const at = arrivals.get(e.key);
      if (at === undefined) missing++;
      else delays.push(Math.max(0, at - e.answeredAt));
    }
  }
}

log(`throughput: ${BURST} edits as fast as the server answers, then until all are delivered`);
const before = received;
const burstStart = performance.now();
let sent = 0;
await Promise.all(
  Array.from({ length: 20 }, async () => {
    while (sent < BURST) {
      sent++;
      await edit();
    }
  }),
);
const editsDone = performance.now();
const deadline = performance.now() + 120_000;
while (received - before < BURST && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
const burstEnd = performance.now();

const result = {
  date: new Date().toISOString(),
  machine: {
    cpus: os.cpus().length,
    model: os.cpus()[0]?.model ?? 'unknown',
    memory_gib: Math.round(os.totalmem() / 2 ** 30),
  },
  rate_per_second: RATE,
  seconds_per_phase: SECONDS,
  delivery_delay_from_answer: timing(delays),
  undelivered_within_30s: missing,
  api_latency_endpoint_off: timing(latency.off),
  api_latency_endpoint_on: timing(latency.on),
  burst: {
    edits: BURST,
    edits_seconds: round((editsDone - burstStart) / 1000),
    delivered: received - before,
    delivered_seconds: round((burstEnd - burstStart) / 1000),
    deliveries_per_second: round(((received - before) * 1000) / (burstEnd - burstStart)),
  },
};
process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
const dir = resolve(import.meta.dirname, 'results');
await mkdir(dir, { recursive: true });
await writeFile(
  resolve(dir, `webhooks-${result.date.slice(0, 10)}.json`),
  `${JSON.stringify(result, null, 2)}\n`,
);

await server.stop();
await agent.close();
receiver.closeAllConnections();
receiver.close();
const redis = new Redis(env.REDIS_URL);
const keys = await redis.keys(`${prefix}:*`);
if (keys.length > 0) await redis.del(...keys);
await redis.quit();
