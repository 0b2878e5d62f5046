import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DbHandle, openDatabase } from '../../infra/db/open.ts';
import { compareWithRebuild, type Receiver, startReceiver, until } from '../../reliability/crash-support.ts';
import { composeAvailable, engineRun, type Stack, startStack } from '../support/compose.ts';
import { type LoadAccount, startLoad } from '../support/compose-load.ts';
import { ROOT } from '../support/process.ts';
import { containersMode } from '../support/services.ts';

/*
 * The compose deployment (containers/compose.yaml) scaled out: two replicas of the service behind
 * HAProxy and two workers, on one PostgreSQL and one Redis, each in its container, every request
 * through the load balancer. Which replica answered a request is read from the replicas' own access
 * logs, by the request id the answer carries. Then it is operated as docs/operations.md says: a
 * replica added under load, a rolling upgrade under load with a migration that adds a column
 * (containers/upgrade.sh), a backup while it serves and a restore that it is moved onto
 * (containers/backup.sh, restore.sh), its database away, and a replica killed mid-burst.
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

/** The image of the next release, in the upgrade test: this one with a migration that adds a column. */
const NEXT_IMAGE = `content-service:upgrade-test-${process.pid}`;
const NEXT_MIGRATION = '2099-12-31-900-upgrade-probe';
type Answer = { status: number; requestId: string; body: Record<string, unknown>; headers: Headers };

describe.skipIf(!availability.ok)('the compose deployment: two replicas behind HAProxy, two workers', () => {
  let stack: Stack;
  let handle: DbHandle | undefined;
  let receiver: Receiver;
  const seeded: Seeded[] = [];
  /** Accounts of their own for the load the deployment is changed under (each has its request budget). */
  const loadAccounts: LoadAccount[] = [];

  beforeAll(async () => {
    if (!availability.ok) return;
    receiver = await startReceiver(undefined, '0.0.0.0');
    stack = await startStack({
      compose: availability.compose,
      replicas: 2,
      workers: 2,
      // The webhook receiver is this test, on the host: a private address, allowed here only.
      // The load's sign-in pages all come from this host: its page budget is not what is tested here.
      env: {
        OUTBOUND_ALLOW_NETWORKS: '10.0.0.0/8,172.16.0.0/12,192.168.0.0/16',
        PAGE_RATE_LIMIT_PER_MINUTE: '1000000',
      },
    });
    // Four accounts, so that each part of the test has the per-account request budget to itself, and
    // six for the load; seeded side by side (each seed-demo is a process of its own in a replica).
    const accounts = await Promise.all(Array.from({ length: 10 }, () => seed(stack)));
    seeded.push(...accounts.slice(0, 4));
    for (const account of accounts.slice(4)) {
      const [articleId] = await articlesOf(account);
      loadAccounts.push({ apiKey: account.api_key, articleId: articleId as string });
    }
    handle = await openDatabase({ databaseUrl: stack.databaseUrl, dataDir: 'memory://' });
  }, 300_000);

  afterAll(async () => {
    await handle?.close();
    await stack?.down();
    await receiver?.close();
    await engineRun(['rmi', '--force', NEXT_IMAGE]).catch(() => undefined);
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

  it('starts its processes from the compile cache the image carries for the user it runs as', async () => {
    // A module a start loads, read compiled (NODE_DEBUG_NATIVE says so), in a container of the image.
    const r = await engineRun([
      'run',
      '--rm',
      '-e',
      'NODE_DEBUG_NATIVE=COMPILE_CACHE',
      'content-service:latest',
      'node',
      '--input-type=module',
      '-e',
      "import('/app/infra/config.ts')",
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain(
      'retrieving transpile cache for StrippedTypeScript file:///app/infra/config.ts...success',
    );
  });

  it('runs alone on the embedded default, as `docker run` with a volume for /data does, and after a kill', async () => {
    // The image's user is not the one that made the embedded template at build: it copies it all the same.
    const name = `cs-embedded-${process.pid}`;
    const volume = `${name}-data`;
    const names = [name, `${name}-after-kill`];
    /** Starts a container of the service on the volume; whether it answered /healthz, and its log. */
    const serve = async (container: string) => {
      const started = await engineRun([
        'run',
        '-d',
        '--name',
        container,
        '-p',
        '127.0.0.1::3000',
        '-v',
        `${volume}:/data`,
        'content-service:latest',
      ]);
      expect(started.code, started.stderr).toBe(0);
      const port = await engineRun(['port', container, '3000']);
      const address = port.stdout.trim().split('\n')[0] ?? '';
      let health = 0;
      const up = await until(async () => {
        const state = await engineRun(['inspect', '-f', '{{.State.Running}}', container]);
        if (state.stdout.trim() !== 'true') return true;
        health = await fetch(`http://${address}/healthz`).then(
          (r) => r.status,
          () => 0,
        );
        return health === 200;
      }, 90_000);
      const logs = await engineRun(['logs', container]);
      return { up, health, log: logs.stdout + logs.stderr };
    };
    try {
      const first = await serve(name);
      expect({ up: first.up, health: first.health }, first.log).toEqual({ up: true, health: 200 });
      const host = (await engineRun(['inspect', '-f', '{{.Config.Hostname}}', name])).stdout.trim();

      // A second container on the volume (another host name) sees the running one renew its lock:
      // refused, exit 1, naming it.
      const beside = await engineRun(['run', '--rm', '-v', `${volume}:/data`, 'content-service:latest']);
      expect(beside.code, beside.stdout + beside.stderr).toBe(1);
      expect(beside.stderr).toContain(
        `DATA_DIR="/data" is in use by the server (npm start) (pid 1 on ${host}, since `,
      );

      // Killed by force, it leaves its lock behind; a new container finds it renewed no more and takes it over.
      expect((await engineRun(['kill', name])).code).toBe(0);
      const after = await serve(names[1] as string);
      expect({ up: after.up, health: after.health }, after.log).toEqual({ up: true, health: 200 });
      expect(after.log).toContain(
        `DATA_DIR=\\"/data\\" is locked by the server (npm start) (pid 1 on ${host}, since `,
      );
      expect(after.log).toContain('taking the lock over unless it is renewed within 20 s');
    } finally {
      for (const container of names) await engineRun(['rm', '-f', container]);
      await engineRun(['volume', 'rm', '-f', volume]);
    }
  }, 240_000);

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
      ['node', 'apps/cli/main.js', 'ingest', 'articles', '--file', '-'],
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

  it('keeps a replica whose database is away in the pool: it answers its own 503 problem+json', async () => {
    const account = seeded[3] as Seeded;
    const stop = await stack.compose(['stop', '--timeout', '10', 'postgres']);
    expect(stop.code, stop.stderr).toBe(0);
    try {
      const refused = await call(account.api_key, 'GET', '/sites');
      expect(refused.status).toBe(503);
      expect(refused.headers.get('content-type')).toContain('application/problem+json');
      expect(refused.body).toMatchObject({ code: 'unavailable' });
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      // The replica's own answer, not the load balancer's.
      expect(refused.requestId).toMatch(/^req_/);
      expect(refused.requestId).not.toMatch(/^req_lb/);
      const ready = await fetch(`${stack.url}/readyz`);
      expect(ready.status).toBe(200);
      expect(await ready.json()).toEqual({ status: 'ready' });
    } finally {
      const start = await stack.compose(['start', 'postgres']);
      expect(start.code, start.stderr).toBe(0);
    }
    expect(
      await until(async () => (await call(account.api_key, 'GET', '/sites')).status === 200, 90_000),
    ).toBe(true);
  }, 180_000);

  it('adds a replica under load with no failed request', async () => {
    const before = await stack.containers('app');
    const load = startLoad(stack.url, loadAccounts);
    await until(() => load.requests >= 30, 60_000);
    const up = await stack.compose(['up', '-d', '--no-deps', '--no-recreate', '--scale', 'app=3', 'app']);
    expect(up.code, up.stderr).toBe(0);
    const added = (await stack.containers('app')).filter((id) => !before.includes(id));
    expect(added).toHaveLength(1);
    const address = await stack.addressOf(added[0] as string);
    expect(await until(async () => (await stack.upAddresses()).includes(address), 120_000)).toBe(true);
    // The new replica takes its share of the load.
    const served = async () => (await stack.logs(added[0] as string)).includes('"url":"/sign-in"');
    expect(await until(served, 60_000)).toBe(true);
    const result = await load.stop();
    expect(result.failures, await warnings(stack)).toEqual([]);
    expect(result.requests).toBeGreaterThan(30);
  }, 300_000);

  it('upgrades replica by replica under load (containers/upgrade.sh), with a migration that adds a column, and no request fails', async () => {
    await buildNextImage();
    const nextImage = (
      await engineRun(['image', 'inspect', '--format', '{{.Id}}', NEXT_IMAGE])
    ).stdout.trim();
    const before = await stack.containers('app');
    // The old replicas' logs, kept past their removal by the upgrade: a failure names what they said.
    const replaced = before.map(async (id) => {
      const r = await engineRun(['logs', '--follow', id]);
      return { id, text: r.stdout + r.stderr };
    });
    const load = startLoad(stack.url, loadAccounts);
    await until(() => load.requests >= 30, 60_000);
    const upgrade = await stack.script('upgrade.sh', [], { CS_IMAGE: NEXT_IMAGE });
    expect(upgrade.code, upgrade.stdout + upgrade.stderr).toBe(0);
    // Its steps, with their times, in the test's output.
    console.log(upgrade.stdout);
    // The new replicas answer a while longer under the same load.
    const mark = load.requests;
    await until(() => load.requests >= mark + 50, 60_000);
    const result = await load.stop();
    expect(result.failures, await warnings(stack, await Promise.all(replaced))).toEqual([]);

    const after = await stack.containers('app');
    expect(after).toHaveLength(before.length);
    expect(after.filter((id) => before.includes(id))).toEqual([]);
    // No replica or worker has a volume of its own (the image's /data is a tmpfs in compose.yaml), so
    // replacing them leaves none behind.
    for (const id of [...after, ...(await stack.containers('worker'))]) {
      const mounts = await engineRun([
        'inspect',
        '--format',
        '{{range .Mounts}}{{.Type}}:{{.Name}} {{end}}',
        id,
      ]);
      expect(mounts.stdout.trim().split(/\s+/)).toEqual([`volume:${stack.project}_media`]);
    }
    for (const id of [...after, ...(await stack.containers('worker'))]) {
      expect((await engineRun(['inspect', '--format', '{{.Image}}', id])).stdout.trim()).toBe(nextImage);
    }
    const db = (handle as DbHandle).db;
    const column = await sql<{ name: string }>`select column_name as name from information_schema.columns
      where table_name = 'articles' and column_name = 'upgrade_probe'`.execute(db);
    expect(column.rows).toHaveLength(1);
    const migrated = await sql<{ name: string }>`select name from kysely_migration
      where name = ${NEXT_MIGRATION}`.execute(db);
    expect(migrated.rows).toHaveLength(1);
  }, 400_000);

  it('backs up while serving (containers/backup.sh), restores into a new database (restore.sh) and moves the service onto it', async () => {
    const account = seeded[2] as Seeded;
    const [articleId] = await articlesOf(account);
    const before = await call(account.api_key, 'PUT', `/articles/${articleId}`, {
      title: 'Before the backup',
    });
    expect(before.status).toBe(200);

    const dir = await mkdtemp(join(tmpdir(), 'cs-backup-'));
    try {
      const file = join(dir, 'content.dump');
      // A backup that fails leaves the last good one as it was, and nothing beside it.
      await writeFile(file, 'the last good backup');
      const failed = await stack.script('backup.sh', [file], { CS_DATABASE: 'no_such_database' });
      expect(failed.code).not.toBe(0);
      expect(await readFile(file, 'utf8')).toBe('the last good backup');
      expect(await readdir(dir)).toEqual(['content.dump']);

      const backup = await stack.script('backup.sh', [file]);
      expect(backup.code, backup.stderr).toBe(0);
      expect((await stat(file)).size).toBeGreaterThan(10_000);
      expect(await readdir(dir)).toEqual(['content.dump']);

      const after = await call(account.api_key, 'PUT', `/articles/${articleId}`, {
        title: 'After the backup',
      });
      expect(after.status).toBe(200);

      // Never into a database that exists (the live one least of all).
      const refused = await stack.script('restore.sh', [file, 'content']);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain('exists');
      const restore = await stack.script('restore.sh', [file, 'content_restored']);
      expect(restore.code, restore.stderr).toBe(0);
      expect(restore.stdout).toContain('CS_DATABASE=content_restored containers/upgrade.sh');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }

    // The service moves onto the restored copy as the restore says; this release's image, on a
    // database that the next release's migration has been applied to.
    const move = await stack.script('upgrade.sh', [], { CS_DATABASE: 'content_restored' });
    expect(move.code, move.stdout + move.stderr).toBe(0);
    const read = await call(account.api_key, 'GET', `/articles/${articleId}`);
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ title: 'Before the backup', revision: before.body.revision });
    const edit = await call(account.api_key, 'PUT', `/articles/${articleId}`, {
      title: 'On the restored copy',
    });
    expect(edit.status).toBe(200);
    expect(edit.body).toMatchObject({ revision: Number(before.body.revision) + 1 });

    await handle?.close();
    handle = await openDatabase({
      databaseUrl: stack.databaseUrl.replace(/\/content$/, '/content_restored'),
      dataDir: 'memory://',
    });
  }, 400_000);

  it('reads from a streaming replica (--profile replica) and never an older revision after a write', async () => {
    const replica = await stack.compose(
      ['--profile', 'replica', 'up', '-d', '--no-deps', 'postgres-replica'],
      {
        REPLICA_APPLY_DELAY: '2s',
      },
    );
    expect(replica.code, replica.stderr).toBe(0);
    // The replicas and the worker move onto it as an operator does: its URL in the env file, then an
    // upgrade. Its replay is held 2 s behind the primary on purpose.
    const dir = await mkdtemp(join(tmpdir(), 'cs-env-'));
    const envFile = join(dir, 'service.env');
    await writeFile(
      envFile,
      `DATABASE_REPLICA_URLS=postgres://postgres:${stack.password}@postgres-replica:5432/content_restored\n` +
        'REPLICA_MAX_LAG_SECONDS=30\nPAGE_RATE_LIMIT_PER_MINUTE=1000000\n',
    );
    try {
      const move = await stack.script('upgrade.sh', [], {
        CS_DATABASE: 'content_restored',
        CS_ENV_FILE: envFile,
      });
      expect(move.code, move.stdout + move.stderr).toBe(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    const readsOn = async (target: string): Promise<number> => {
      let total = 0;
      for (const id of await stack.containers('app')) {
        const text = await replicaMetrics(id);
        for (const m of text.matchAll(/^content_service_db_reads_total\{target="([^"]+)"\} (\d+)/gm)) {
          if (m[1] === target) total += Number(m[2]);
        }
      }
      return total;
    };
    // 200 write-then-read pairs, 25 for each of eight accounts at once (the load's six and two others;
    // not the one the kill below spends its budget on): each read is of the revision just written,
    // whichever replica of the service it reaches, though the database replica is 2 s behind.
    const accounts: LoadAccount[] = [...loadAccounts];
    for (const account of [seeded[2], seeded[3]] as Seeded[]) {
      accounts.push({ apiKey: account.api_key, articleId: (await articlesOf(account))[0] as string });
    }
    const stale: string[] = [];
    await Promise.all(
      accounts.map(async ({ apiKey, articleId }, lane) => {
        for (let i = 0; i < 25; i++) {
          const title = `Read your writes ${lane}.${i}`;
          const edit = await call(apiKey, 'PUT', `/articles/${articleId}`, { title });
          expect(edit.status, JSON.stringify(edit.body)).toBe(200);
          const read = await call(apiKey, 'GET', `/articles/${articleId}`);
          expect(read.status).toBe(200);
          if (read.body.title !== title || read.body.revision !== edit.body.revision) {
            stale.push(`${title}: read ${String(read.body.title)} r${String(read.body.revision)}`);
          }
        }
      }),
    );
    expect(stale).toEqual([]);
    // Reads with no write before them, of an account made just now (by the CLI, on the primary), are
    // the replica's once it has replayed the account.
    const idle = await seed(stack);
    const before = await readsOn('postgres-replica:5432');
    const servedByReplica = async () => {
      expect((await call(idle.api_key, 'GET', '/sites')).status).toBe(200);
      return (await readsOn('postgres-replica:5432')) > before;
    };
    expect(await until(servedByReplica, 30_000)).toBe(true);
  }, 400_000);

  it('keeps every acknowledged edit when a replica is killed mid-burst; the read models equal a rebuild', async () => {
    const account = seeded[0] as Seeded;
    const articles = (await articlesOf(account)).slice(0, 4);
    const [victim] = await stack.containers('app');
    const acknowledged: Array<{ articleId: string; title: string; revision: number }> = [];
    const failed: Answer[] = [];
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
              body: { error: `${err.message} (${(err.cause as Error | undefined)?.message ?? 'no cause'})` },
              headers: new Headers(),
            }),
          );
          if (r.status === 200) acknowledged.push({ articleId, title, revision: Number(r.body.revision) });
          else failed.push(r);
        }
      }),
    );
    expect(killed).toBe(true);
    expect(acknowledged.length).toBeGreaterThan(13);
    // What the killed replica held is cut when its address leaves DNS (a closed connection), or
    // answered problem+json by the load balancer; not left for the test's 30 s to time out.
    for (const answer of failed) {
      if (answer.status === 0) expect(String(answer.body.error)).toContain('other side closed');
      else expect(answer.body).toMatchObject({ code: 'unavailable' });
    }

    // Nothing writes while the read models are compared with a rebuild from the log.
    const stop = await stack.compose(['stop', '--timeout', '40', 'app', 'worker']);
    expect(stop.code, stop.stderr).toBe(0);
    // With no replica, the load balancer's own answer is problem+json too.
    const none = await fetch(`${stack.url}/api/v1/sites`);
    expect(none.status).toBe(503);
    expect(none.headers.get('content-type')).toBe('application/problem+json');
    expect(none.headers.get('retry-after')).toBe('5');
    expect(none.headers.get('x-request-id')).toMatch(/^req_lb/);
    expect(await none.json()).toMatchObject({ status: 503, code: 'unavailable' });
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
    expect(missing, `failed: ${failed.map((a) => a.status).join(', ')}`).toEqual([]);
    const comparison = await compareWithRebuild(db);
    expect(comparison.rows).toBeGreaterThan(0);
    expect(comparison.diffs).toEqual([]);
  }, 240_000);
});

/**
 * The next release's image: this one with a migration that adds a nullable column to `articles`
 * (an expand step, which the running release must work beside).
 */
async function buildNextImage(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'cs-next-'));
  try {
    const index = await readFile(join(ROOT, 'infra/db/migrations/index.ts'), 'utf8');
    const marker = 'const all: Record<string, Migration> = {';
    if (!index.includes(marker)) throw new Error('infra/db/migrations/index.ts has changed its shape');
    await writeFile(
      join(dir, 'index.ts'),
      `import * as upgradeProbe from './${NEXT_MIGRATION}.ts';\n` +
        index.replace(marker, `${marker}\n  '${NEXT_MIGRATION}': upgradeProbe,`),
    );
    await writeFile(
      join(dir, `${NEXT_MIGRATION}.ts`),
      "import { type Kysely, sql } from 'kysely';\n" +
        '// biome-ignore lint/suspicious/noExplicitAny: a migration\n' +
        'export async function up(db: Kysely<any>): Promise<void> {\n' +
        '  await sql`alter table articles add column upgrade_probe text`.execute(db);\n' +
        '}\n',
    );
    await writeFile(
      join(dir, 'Containerfile'),
      `FROM content-service:latest\nCOPY ${NEXT_MIGRATION}.ts index.ts /app/infra/db/migrations/\n`,
    );
    const built = await engineRun(['build', '-q', '-f', join(dir, 'Containerfile'), '-t', NEXT_IMAGE, dir]);
    if (built.code !== 0) throw new Error(`building ${NEXT_IMAGE} failed: ${built.stderr}`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * What the replicas logged at warn and above (pino levels 40+), for a failure's message: the running
 * ones', after `replaced` (logs kept of replicas since removed).
 */
async function warnings(stack: Stack, replaced: Array<{ id: string; text: string }> = []): Promise<string> {
  const lines: string[] = [];
  const running = await stack.containers('app');
  const logs = [
    ...replaced,
    ...(await Promise.all(running.map(async (id) => ({ id, text: await stack.logs(id) })))),
  ];
  for (const { id, text } of logs) {
    for (const line of text.split('\n')) {
      if (/"level":[4-6]0/.test(line)) lines.push(`${id.slice(0, 12)} ${line.slice(0, 900)}`);
    }
  }
  return lines.slice(-40).join('\n');
}

/** A replica's Prometheus text, from its metrics port inside the container (bash's /dev/tcp). */
async function replicaMetrics(container: string): Promise<string> {
  const r = await engineRun([
    'exec',
    container,
    'bash',
    '-c',
    'exec 3<>/dev/tcp/127.0.0.1/9464 && printf "GET /metrics HTTP/1.0\\r\\n\\r\\n" >&3 && cat <&3',
  ]);
  return r.stdout;
}

async function seed(stack: Stack): Promise<Seeded> {
  const r = await stack.exec([
    'node',
    'apps/cli/main.js',
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
