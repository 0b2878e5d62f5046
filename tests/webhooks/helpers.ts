import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Runtime } from '../../apps/runtime.ts';
import { webhookJobs } from '../../apps/worker/jobs/webhooks.ts';
import type { DomainEvent } from '../../domain/events.ts';
import type { Db } from '../../infra/db/schema.ts';
import { createBullJobs } from '../../infra/jobs/bullmq.ts';
import { createInProcessJobs } from '../../infra/jobs/in-process.ts';
import type { Jobs, JobsLogger } from '../../infra/jobs/queue.ts';
import { createDirectoryMediaStore } from '../../infra/media/store.ts';
import { allowNetworks } from '../../infra/net/guarded-fetch.ts';
import type { AsyncProjector } from '../../infra/projection.ts';
import { startAsyncProjections } from '../../infra/projection-runner.ts';
import { closeRedis, openRedis, waitForRedis } from '../../infra/redis.ts';
import { createWebhookSender, type SendWebhook } from '../../infra/webhooks/send.ts';
import { apiKeyActor } from '../support/runtime.ts';
import { TEST_REDIS_URL } from '../support/services.ts';

/*
 * What the webhook tests share: a receiving node:http server on 127.0.0.1 (reached through the SSRF
 * guard because the sender is told 127.0.0.1/32 is one of the deployment's networks, as
 * OUTBOUND_ALLOW_NETWORKS would), endpoints inserted straight into their table, and the delivery engine
 * wired on either queue: BullMQ on the real Redis (a key prefix of its own) or the in-process queue.
 */

export const REDIS_URL = TEST_REDIS_URL;
export type QueueKind = 'in-process' | 'bullmq';
export const queueKinds: QueueKind[] = ['in-process', 'bullmq'];

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `check` holds (polling), or fails naming what it waited for. */
export async function until(
  check: () => Promise<boolean> | boolean,
  what: string,
  ms = 20_000,
): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** A request the receiver got. */
export type Received = { path: string; headers: IncomingHttpHeaders; body: string };

/** What the receiver answers on a path, given how many requests that path had before this one (0 first). */
export type Behaviour = (before: number, request: Received) => number | Promise<number>;

export type Receiver = {
  url(pathname: string): string;
  /** Every request, in arrival order. */
  received: Received[];
  on(pathname: string, behaviour: Behaviour): void;
  close(): Promise<void>;
};

/** A webhook receiver on 127.0.0.1: 204 unless told otherwise per path. */
export async function startReceiver(): Promise<Receiver> {
  const received: Received[] = [];
  const behaviours = new Map<string, Behaviour>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const request = {
        path: req.url ?? '/',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      };
      const before = received.filter((r) => r.path === request.path).length;
      received.push(request);
      Promise.resolve((behaviours.get(request.path) ?? (() => 204))(before, request)).then(
        (status) => {
          res.statusCode = status;
          res.end(status === 204 ? undefined : `answer ${status}`);
        },
        () => {
          res.statusCode = 500;
          res.end();
        },
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: (pathname) => `http://127.0.0.1:${port}${pathname}`,
    received,
    on: (pathname, behaviour) => behaviours.set(pathname, behaviour),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The sender the tests use: loopback is one of the deployment's networks, so http to 127.0.0.1 is allowed. */
export function loopbackSender(opts: { timeoutMs?: number } = {}): SendWebhook {
  return createWebhookSender({ allowAddresses: allowNetworks(['127.0.0.1/32']), ...opts });
}

/** A Standard Webhooks secret: `whsec_` and base64 of 24 random bytes. */
export function newSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

/** Inserts an endpoint as the endpoint use cases would; created long ago unless said. */
export async function addEndpoint(
  db: Db,
  input: { accountId: string; url: string; events: string[]; createdAt?: Date; enabled?: boolean },
): Promise<{ id: string; secret: string }> {
  const id = `wh_${randomUUID().replaceAll('-', '')}`;
  const secret = newSecret();
  const at = input.createdAt ?? new Date('2020-01-01T00:00:00Z');
  await db
    .insertInto('webhook_endpoints')
    .values({
      id,
      account_id: input.accountId,
      url: input.url,
      events: input.events,
      description: null,
      secret,
      enabled: input.enabled ?? true,
      disabled_reason: null,
      disabled_at: null,
      failing_since: null,
      created_at: at,
      updated_at: at,
    })
    .execute();
  return { id, secret };
}

/** A new account with one site. */
export async function newAccount(runtime: Runtime): Promise<{ accountId: string; siteId: string }> {
  const { accountId } = await runtime.commands.openAccount({
    name: 'Webhook Test',
    email: `hooks.${randomUUID().slice(0, 8)}@example.com`,
  });
  const { siteId } = await runtime.commands.addSite(accountId, {
    name: 'Northside Plumbing',
    domain: 'northside.example',
    url: 'https://northside.example/',
  });
  return { accountId, siteId };
}

/** A draft article of the site; returns its id. */
export async function newArticle(
  runtime: Runtime,
  accountId: string,
  siteId: string,
  title = 'Fixing a leaking tap',
): Promise<string> {
  const { articleId } = await runtime.commands.createArticle(
    accountId,
    {
      siteId,
      title,
      body: '<p>Turn off the water first.</p>',
      url: `https://northside.example/${randomUUID().slice(0, 8)}`,
      status: 'draft',
      publishedAt: null,
      targetKeyword: 'leaking tap',
      featuredImage: null,
    },
    { origin: 'api', actor: apiKeyActor },
  );
  return articleId;
}

export const quietLogger: JobsLogger & { error(obj: object, msg: string): void } = {
  info: () => {},
  warn: () => {},
  error: () => {},
  debug: () => {},
};

/** The delivery engine on one queue: its jobs' workers and its subscription running, a clock tests can move. */
export type Engine = {
  jobs: Jobs;
  /** The subscription (`webhooks@1`), to run by hand when the engine runs none. */
  subscription: AsyncProjector<DomainEvent>;
  /** Moves the engine's clock (not the receiver's). */
  advance(ms: number): void;
  now(): Date;
  /** Runs the sweep as the repeatable job and the start would. */
  sweep(): Promise<void>;
  /** Waits for the subscription to have applied everything committed. */
  idle(): Promise<void>;
  stop(): Promise<void>;
};

/** Removes this test's own keys from the shared Redis (never anything else: no flush). */
async function removeKeys(pattern: string): Promise<void> {
  const redis = openRedis(REDIS_URL, { name: 'cs-test-cleanup' });
  try {
    if (!(await waitForRedis(redis, 5_000))) throw new Error(`Redis at ${REDIS_URL} is unreachable`);
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 500);
      if (keys.length > 0) await redis.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    await closeRedis(redis);
  }
}

export async function startEngine(
  runtime: Runtime,
  kind: QueueKind,
  opts: {
    retrySchedule?: number[];
    send?: SendWebhook;
    subscription?: boolean;
    publicUrl?: string;
  } = {},
): Promise<Engine> {
  let offset = 0;
  const now = (): Date => new Date(Date.now() + offset);
  let jobs: Jobs | undefined;
  const webhooks = webhookJobs({
    db: runtime.db,
    commands: runtime.commands,
    media: createDirectoryMediaStore(path.join(tmpdir(), `cs-webhooks-${randomUUID()}`)),
    jobs: {
      add: (name, data, addOpts) => {
        if (!jobs) throw new Error('jobs not started');
        return jobs.add(name, data, addOpts);
      },
    },
    publicUrl: opts.publicUrl ?? 'https://content.example',
    now,
    logger: quietLogger,
    retrySchedule: opts.retrySchedule ?? [1, 1],
    send: opts.send ?? loopbackSender(),
  });
  const prefix = `test-${randomUUID()}`;
  jobs =
    kind === 'bullmq'
      ? createBullJobs({
          redisUrl: REDIS_URL,
          prefix,
          kinds: webhooks.kinds,
          logger: quietLogger,
          lockMs: 5_000,
        })
      : createInProcessJobs({ kinds: webhooks.kinds, logger: quietLogger });
  jobs.startWorkers();
  const runner =
    opts.subscription === false
      ? undefined
      : startAsyncProjections({
          handle: runtime.handle,
          projectors: webhooks.subscriptions ?? [],
          pollMs: 200,
          settleMs: 0,
        });
  const started = jobs;
  const [subscription] = webhooks.subscriptions ?? [];
  if (!subscription) throw new Error('no webhook subscription');
  return {
    jobs: started,
    subscription,
    advance: (ms) => {
      offset += ms;
    },
    now,
    sweep: async () => webhooks.sweep?.(),
    idle: async () => runner?.idle(),
    async stop() {
      await runner?.stop();
      await started.close(2_000);
      if (kind === 'bullmq') await removeKeys(`${prefix}:*`);
    },
  };
}
