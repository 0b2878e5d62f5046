import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DbHandle, openDatabase } from '../../infra/db/open.ts';
import { compareWithRebuild, type Receiver, startReceiver, until } from '../../reliability/crash-support.ts';
import { composeAvailable, type Stack, startStack } from '../support/compose.ts';
import { containersMode } from '../support/services.ts';

/*
 * The compose deployment (containers/compose.yaml) scaled out: two replicas of the service behind
 * HAProxy and two workers, on one PostgreSQL and one Redis, each in its container, every request
 * through the load balancer. Which replica answered a request is read from the replicas' own access
 * logs, by the request id the answer carries.
 *
 * It needs a container engine, a compose command and the images (containers/build.sh); without them
 * it is skipped, saying which is missing, unless TEST_CONTAINERS=require (CI), where that fails.
 */

const mode = containersMode(process.env.TEST_CONTAINERS);
const availability =
  mode === 'off' ? ({ ok: false, reason: 'TEST_CONTAINERS=off' } as const) : await composeAvailable();
if (!availability.ok && mode === 'require') {
  throw new Error(`TEST_CONTAINERS=require, and the compose stack cannot start: ${availability.reason}`);
}

type Seeded = { account_id: string; api_key: string; sites: Array<{ id: string }> };
type Answer = { status: number; requestId: string; body: Record<string, unknown>; headers: Headers };

describe.skipIf(!availability.ok)('the compose deployment: two replicas behind HAProxy, two workers', () => {
  let stack: Stack;
  let handle: DbHandle | undefined;
  let receiver: Receiver;
  const seeded: Seeded[] = [];

  beforeAll(async () => {
    if (!availability.ok) return;
    receiver = await startReceiver(undefined, '0.0.0.0');
    stack = await startStack({
      compose: availability.compose,
      replicas: 2,
      workers: 2,
      // The webhook receiver is this test, on the host: a private address, allowed here only.
      env: { OUTBOUND_ALLOW_NETWORKS: '10.0.0.0/8,172.16.0.0/12,192.168.0.0/16' },
    });
    // Four accounts, so that each part of the test has the per-account request budget to itself.
    for (let i = 0; i < 4; i++) seeded.push(await seed(stack));
    handle = await openDatabase({ databaseUrl: stack.databaseUrl, dataDir: 'memory://' });
  }, 300_000);

  afterAll(async () => {
    await handle?.close();
    await stack?.down();
    await receiver?.close();
  }, 120_000);

  const call = async (
    key: string,
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
    timeoutMs = 60_000,
  ): Promise<Answer> => {
    const res = await fetch(`${stack.url}/api/v1${path}`, {
      method,
      signal: AbortSignal.timeout(timeoutMs),
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return {
      status: res.status,
      requestId: res.headers.get('x-request-id') ?? '',
      body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
      headers: res.headers,
    };
  };

  /** The replica (container id) whose access log has each request id. */
  const replicasOf = async (requestIds: string[]): Promise<Map<string, string>> => {
    const found = new Map<string, string>();
    await until(async () => {
      for (const container of await stack.containers('app')) {
        const log = await stack.logs(container);
        for (const id of requestIds) if (log.includes(`"reqId":"${id}"`)) found.set(id, container);
      }
      return requestIds.every((id) => found.has(id));
    }, 30_000);
    return found;
  };

  const articlesOf = async (account: Seeded): Promise<string[]> => {
    const site = account.sites[0]?.id;
    const list = await call(account.api_key, 'GET', `/sites/${site}/articles?from=2000-01-01&to=2100-01-01`);
    return (list.body.data as Array<{ id: string }>).map((a) => a.id);
  };

  it('serves the sign-in page and /readyz through the load balancer, from both replicas', async () => {
    for (let i = 0; i < 4; i++) {
      const page = await fetch(`${stack.url}/sign-in`);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('<form');
      expect((await fetch(`${stack.url}/readyz`)).status).toBe(200);
    }
    const [account] = seeded as [Seeded];
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const r = await call(account.api_key, 'GET', '/sites');
      expect(r.status).toBe(200);
      ids.push(r.requestId);
    }
    expect(new Set((await replicasOf(ids)).values()).size).toBe(2);
  });

  it('applies an API edit, and every replica reads it back', async () => {
    const [account] = seeded as [Seeded];
    const [articleId] = await articlesOf(account);
    const edit = await call(account.api_key, 'PUT', `/articles/${articleId}`, {
      title: 'Edited through HAProxy',
    });
    expect(edit.status).toBe(200);
    expect(edit.body).toMatchObject({ title: 'Edited through HAProxy', revision: 2 });
    const reads = [];
    for (let i = 0; i < 4; i++) reads.push(await call(account.api_key, 'GET', `/articles/${articleId}`));
    expect(reads.map((r) => r.body.title)).toEqual(Array(4).fill('Edited through HAProxy'));
    expect(new Set((await replicasOf(reads.map((r) => r.requestId))).values()).size).toBe(2);
  });

  it('holds the per-account limit across replicas: the 61st call in a minute is refused', async () => {
    const account = seeded[1] as Seeded;
    const answers: Answer[] = [];
    for (let i = 0; i < 61; i++) answers.push(await call(account.api_key, 'GET', '/sites'));
    const first60 = answers.slice(0, 60);
    expect(first60.map((a) => a.status)).toEqual(Array(60).fill(200));
    // One budget: the remaining count goes down by one whichever replica answered.
    expect(first60.map((a) => Number(/r=(\d+)/.exec(a.headers.get('ratelimit') ?? '')?.[1]))).toEqual(
      Array.from({ length: 60 }, (_, i) => 59 - i),
    );
    const refused = answers[60] as Answer;
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ code: 'rate_limited' });
    const replicas = await replicasOf(answers.map((a) => a.requestId));
    expect(new Set(first60.map((a) => replicas.get(a.requestId))).size).toBe(2);
  });

  it('replays an Idempotency-Key retried on the other replica, making no second revision', async () => {
    const account = seeded[2] as Seeded;
    const [articleId] = await articlesOf(account);
    const send = () =>
      call(
        account.api_key,
        'PUT',
        `/articles/${articleId}`,
        { title: 'Sent twice' },
        { 'idempotency-key': 'k-1' },
      );
    const first = await send();
    expect(first.status).toBe(200);
    const firstReplica = (await replicasOf([first.requestId])).get(first.requestId);
    // Round robin sends the next request to the other replica; retry until one has.
    const retries: Answer[] = [];
    let otherReplica = false;
    for (let i = 0; i < 6 && !otherReplica; i++) {
      const retry = await send();
      retries.push(retry);
      otherReplica = (await replicasOf([retry.requestId])).get(retry.requestId) !== firstReplica;
    }
    expect(otherReplica).toBe(true);
    for (const retry of retries) {
      expect(retry.status).toBe(200);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(retry.body).toEqual(first.body);
    }
    const revisions = await call(account.api_key, 'GET', `/articles/${articleId}/revisions`);
    expect((revisions.body.data as Array<{ revision: number }>).map((r) => r.revision)).toEqual([2, 1]);
  });

  it('delivers each webhook once and publishes a scheduled article once, with two workers', async () => {
    const account = seeded[3] as Seeded;
    const hook = await call(account.api_key, 'POST', '/webhooks', {
      url: `http://${stack.hostAddress}:${receiver.port}/hooks`,
      events: ['article.updated', 'article.published'],
    });
    expect(hook.status).toBe(201);
    const [articleId] = await articlesOf(account);
    for (let i = 1; i <= 8; i++) {
      expect(
        (await call(account.api_key, 'PUT', `/articles/${articleId}`, { title: `Hooked ${i}` })).status,
      ).toBe(200);
    }
    // An article scheduled a few seconds ahead, fed in as the content pipeline does.
    const scheduledId = `scheduled-${Date.now()}`;
    const line = {
      id: scheduledId,
      account_id: account.account_id,
      site_id: account.sites[0]?.id,
      title: 'Scheduled',
      body: '<p>Soon.</p>',
      url: `https://example.com/${scheduledId}`,
      status: 'scheduled',
      published_at: new Date(Date.now() + 5_000).toISOString(),
    };
    const ingest = await stack.exec(
      ['node', 'apps/cli/main.ts', 'ingest', 'articles', '--file', '-'],
      `${JSON.stringify(line)}\n`,
    );
    expect(ingest.code, ingest.stderr).toBe(0);

    // Waited for in the read model (polling the API would spend the account's request budget).
    const db = (handle as DbHandle).db;
    const published = async () =>
      (await sql<{ status: string }>`select status from articles where id = ${scheduledId}`.execute(db))
        .rows[0]?.status === 'published';
    expect(await until(published, 90_000)).toBe(true);
    expect((await call(account.api_key, 'GET', `/articles/${scheduledId}`)).body.status).toBe('published');
    const eventsOf = async () =>
      (
        await sql<{ event_id: string }>`select event_id from events
          where stream_id in (${`article-${articleId}`}, ${`article-${scheduledId}`})
            and type in ('ArticleEdited', 'ArticleStatusChanged')`.execute(db)
      ).rows.map((r) => r.event_id);
    const expected = await eventsOf();
    // Eight edits and one publication, each delivered (its own webhook-id) and received once.
    expect(expected).toHaveLength(9);
    const hookId = String(hook.body.id);
    expect(
      await until(() => expected.every((id) => receiver.ids.includes(id)), 90_000),
      JSON.stringify((await call(account.api_key, 'GET', `/webhooks/${hookId}/deliveries`)).body),
    ).toBe(true);
    const deliveries = (
      await sql<{ event_id: string; n: number }>`select event_id, count(*)::int as n from webhook_deliveries
        where source = 'live' group by event_id`.execute(db)
    ).rows;
    expect(deliveries.filter((d) => expected.includes(d.event_id)).map((d) => d.n)).toEqual(Array(9).fill(1));
    expect(receiver.ids.length).toBe(new Set(receiver.ids).size);
    // Published once: one revision more than the ingested one, whichever worker ran the job.
    const revisions = await call(account.api_key, 'GET', `/articles/${scheduledId}/revisions`);
    expect(
      (revisions.body.data as Array<{ revision: number; origin: string }>).map((r) => r.revision),
    ).toEqual([2, 1]);
  }, 240_000);

  it('keeps every acknowledged edit when a replica is killed mid-burst; the read models equal a rebuild', async () => {
    const account = seeded[0] as Seeded;
    const articles = (await articlesOf(account)).slice(0, 4);
    const [victim] = await stack.containers('app');
    const acknowledged: Array<{ articleId: string; title: string; revision: number }> = [];
    const failed: string[] = [];
    let killed = false;
    // Four lanes, one per article, ten edits each; the kill comes once a third are answered.
    await Promise.all(
      articles.map(async (articleId, lane) => {
        for (let i = 1; i <= 10; i++) {
          const title = `Burst ${lane}.${i}`;
          if (!killed && acknowledged.length >= 13) {
            killed = true;
            await stack.kill(victim as string);
          }
          const r = await call(account.api_key, 'PUT', `/articles/${articleId}`, { title }, {}, 30_000).catch(
            (err: Error): Answer => ({
              status: 0,
              requestId: '',
              body: { error: err.message },
              headers: new Headers(),
            }),
          );
          if (r.status === 200) acknowledged.push({ articleId, title, revision: Number(r.body.revision) });
          else failed.push(`${title}: ${r.status}`);
        }
      }),
    );
    expect(killed).toBe(true);
    expect(acknowledged.length).toBeGreaterThan(13);

    // Nothing writes while the read models are compared with a rebuild from the log.
    const stop = await stack.compose(['stop', '--timeout', '10', 'app', 'worker']);
    expect(stop.code, stop.stderr).toBe(0);
    const db = (handle as DbHandle).db;
    const revisions = (
      await sql<{ article_id: string; revision: number; title: string }>`
        select article_id, revision, title from revisions where title like 'Burst %'`.execute(db)
    ).rows;
    const missing = acknowledged.filter(
      (a) =>
        !revisions.some(
          (r) => r.article_id === a.articleId && r.title === a.title && r.revision === a.revision,
        ),
    );
    expect(missing, `failed: ${failed.join(', ')}`).toEqual([]);
    const comparison = await compareWithRebuild(db);
    expect(comparison.rows).toBeGreaterThan(0);
    expect(comparison.diffs).toEqual([]);
  }, 240_000);
});

async function seed(stack: Stack): Promise<Seeded> {
  const r = await stack.exec([
    'node',
    'apps/cli/main.ts',
    'seed-demo',
    '--json',
    '--sites',
    '1',
    '--articles',
    '6',
    '--backlinks',
    '0',
  ]);
  if (r.code !== 0) throw new Error(`seed-demo failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as Seeded;
}
