import { mkdtemp, readdir, rm, utimes } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOAuthAdapter, hashOAuthId } from '../../apps/server/oauth/adapter.ts';
import { ADDRESS_POLICY, CLIENT_POLICY, EMAIL_POLICY } from '../../apps/server/web/throttle.ts';
import { housekeepingJobs } from '../../apps/worker/jobs/housekeeping.ts';
import {
  collectMedia,
  MCP_SESSION_IDLE_MS,
  purgeExpiredSessions,
  purgeIdempotency,
  removeUnusedOAuthClients,
  SIGN_IN_FAILURES_KEPT_MS,
} from '../../infra/jobs/housekeeping.ts';
import { createDirectoryMediaStore } from '../../infra/media/store.ts';
import {
  authorizeWithoutBrowser,
  createPerson,
  type Person,
  PUBLIC_CLIENT,
  registerClient,
  startCallback,
  startTestApp,
  type TestApp,
} from '../oauth/helpers.ts';
import { queueKinds, startTestBackground } from '../support/jobs.ts';
import { addSiteWithArticle } from '../support/runtime.ts';

/*
 * The housekeeping jobs on the real PostgreSQL: each removes exactly what it should and keeps the rest,
 * and two runs at once (two processes) remove each thing once. OAuth clients are registered and
 * connected through the authorization server itself, so the rows are the ones it writes.
 */

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

describe('housekeeping', () => {
  let t: TestApp;
  let callback: Awaited<ReturnType<typeof startCallback>>;
  let person: Person;

  beforeAll(async () => {
    callback = await startCallback();
    t = await startTestApp();
    person = await createPerson(t.runtime);
  });
  afterAll(async () => {
    await t?.close();
    await callback?.close();
  });

  const db = () => t.runtime.db;

  async function register(name: string): Promise<string> {
    const res = await registerClient(t.url, {
      ...PUBLIC_CLIENT,
      client_name: name,
      redirect_uris: [callback.url],
    });
    expect(res.status).toBe(201);
    return ((await res.json()) as { client_id: string }).client_id;
  }
  async function clientsLeft(ids: readonly string[]): Promise<string[]> {
    const rows = await db()
      .selectFrom('oauth_models')
      .select('id')
      .where('kind', '=', 'Client')
      .where(
        'id',
        'in',
        ids.map((id) => hashOAuthId(id)),
      )
      .execute();
    const kept = new Set(rows.map((r) => r.id));
    return ids.filter((id) => kept.has(hashOAuthId(id)));
  }

  describe('OAuth clients never used', () => {
    it('removes the clients registered over 30 days ago that nobody connected, and keeps the others', async () => {
      const unused = await register('Never Used');
      const denied = await register('Denied Once');
      const connected = await register('Connected');
      const disconnected = await register('Connected, Then Disconnected');
      const pending = await register('Authorization Under Way');
      const all = [unused, denied, connected, disconnected, pending];

      await authorizeWithoutBrowser({
        base: t.url,
        person,
        clientId: denied,
        redirectUri: callback.url,
        decision: 'deny',
      });
      await authorizeWithoutBrowser({ base: t.url, person, clientId: connected, redirectUri: callback.url });
      await authorizeWithoutBrowser({
        base: t.url,
        person,
        clientId: disconnected,
        redirectUri: callback.url,
      });
      await t.app.oauth.disconnectClient(person.accountId, disconnected);

      const in31Days = new Date(Date.now() + 31 * DAY);
      // An authorization of `pending` started just now, as the 31st day begins.
      await createOAuthAdapter(
        db(),
        () => in31Days,
      )('Interaction').upsert(
        'interaction-under-way',
        { params: { client_id: pending, redirect_uri: callback.url } },
        1_800,
      );

      expect(
        await removeUnusedOAuthClients({ db: db(), now: () => new Date(Date.now() + 29 * DAY) }),
      ).toEqual({
        removed: 0,
      });
      expect(await clientsLeft(all)).toEqual(all);

      // Two runs at once (two processes): each client is removed once.
      const runs = await Promise.all([
        removeUnusedOAuthClients({ db: db(), now: () => in31Days }),
        removeUnusedOAuthClients({ db: db(), now: () => in31Days }),
      ]);
      expect(runs[0].removed + runs[1].removed).toBe(2);
      expect(await clientsLeft(all)).toEqual([connected, disconnected, pending]);
      expect(await removeUnusedOAuthClients({ db: db(), now: () => in31Days })).toEqual({ removed: 0 });

      // A removed client is unknown to the authorization server: its authorization requests are refused.
      const refused = await fetch(
        `${t.url}/oauth/authorize?${new URLSearchParams({
          response_type: 'code',
          client_id: unused,
          redirect_uri: callback.url,
          scope: 'content:read',
          code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
          code_challenge_method: 'S256',
        })}`,
        { redirect: 'manual' },
      );
      expect(refused.status).toBe(400);
      expect(await refused.text()).toMatch(/invalid_client|client/i);
    });
  });

  describe('sessions, sign-in failure counts, expired OAuth rows', () => {
    const NOW = new Date('2026-11-24T12:00:00Z');
    const ago = (ms: number): Date => new Date(NOW.getTime() - ms);

    it('keeps failure counts as long as the longest window of the sign-in throttle', () => {
      const longest = Math.max(...[EMAIL_POLICY, CLIENT_POLICY, ADDRESS_POLICY].map((p) => p.windowMs));
      expect(SIGN_IN_FAILURES_KEPT_MS).toBeGreaterThanOrEqual(longest);
    });

    it('deletes what has ended and keeps what is live, once however many run at once', async () => {
      await db()
        .insertInto('web_sessions')
        .values([
          {
            id_hash: 'ended',
            account_id: person.accountId,
            created_at: ago(13 * HOUR),
            expires_at: ago(HOUR),
          },
          { id_hash: 'ends-now', account_id: person.accountId, created_at: ago(12 * HOUR), expires_at: NOW },
          {
            id_hash: 'live',
            account_id: person.accountId,
            created_at: ago(HOUR),
            expires_at: new Date(NOW.getTime() + HOUR),
          },
        ])
        .execute();
      const failure = (key: string, lastMs: number, lockedUntil: Date | null) => ({
        key: `test:${key}`,
        failures: 3,
        first_failed_at: ago(lastMs + 60_000),
        last_failed_at: ago(lastMs),
        locked_until: lockedUntil,
      });
      await db()
        .insertInto('sign_in_failures')
        .values([
          failure('stale', 16 * 60_000, null),
          failure('stale-lock-ended', 40 * 60_000, ago(60_000)),
          failure('stale-still-locked', 20 * 60_000, new Date(NOW.getTime() + 60_000)),
          failure('recent', 5 * 60_000, null),
        ])
        .execute();
      const oauthRow = (id: string, expiresAt: Date | null) => ({
        kind: 'AccessToken',
        id: `test-${id}`,
        payload: JSON.stringify({}),
        expires_at: expiresAt,
      });
      await db()
        .insertInto('oauth_models')
        .values([
          oauthRow('expired-long-ago', ago(2 * HOUR)),
          oauthRow('expired-just-now', ago(30 * 60_000)),
          oauthRow('live', new Date(NOW.getTime() + HOUR)),
          oauthRow('never-expires', null),
        ])
        .execute();

      const count = async (table: 'web_sessions' | 'sign_in_failures' | 'oauth_models'): Promise<number> =>
        Number(
          (
            await db()
              .selectFrom(table)
              .select((eb) => eb.fn.countAll<string>().as('n'))
              .executeTakeFirstOrThrow()
          ).n,
        );
      const tables = ['web_sessions', 'sign_in_failures', 'oauth_models'] as const;
      const before = await Promise.all(tables.map(count));
      const runs = await Promise.all([
        purgeExpiredSessions({ db: db(), now: () => NOW }),
        purgeExpiredSessions({ db: db(), now: () => NOW }),
      ]);
      // Each row deleted is counted once, by one of the two runs: the counts add up to what went.
      const after = await Promise.all(tables.map(count));
      expect([
        runs[0].webSessions + runs[1].webSessions,
        runs[0].signInFailures + runs[1].signInFailures,
        runs[0].oauthRows + runs[1].oauthRows,
      ]).toEqual(before.map((b, k) => b - (after[k] ?? 0)));
      expect(await purgeExpiredSessions({ db: db(), now: () => NOW })).toEqual({
        webSessions: 0,
        signInFailures: 0,
        oauthRows: 0,
        mcpSessions: 0,
      });

      const sessions = await db()
        .selectFrom('web_sessions')
        .select('id_hash')
        .where('id_hash', 'in', ['ended', 'ends-now', 'live'])
        .execute();
      expect(sessions.map((r) => r.id_hash)).toEqual(['live']);
      const failures = await db()
        .selectFrom('sign_in_failures')
        .select('key')
        .where('key', 'like', 'test:%')
        .orderBy('key')
        .execute();
      expect(failures.map((r) => r.key)).toEqual(['test:recent', 'test:stale-still-locked']);
      const oauth = await db()
        .selectFrom('oauth_models')
        .select('id')
        .where('id', 'like', 'test-%')
        .orderBy('id')
        .execute();
      expect(oauth.map((r) => r.id)).toEqual(['test-expired-just-now', 'test-live', 'test-never-expires']);
    });

    it('deletes MCP sessions unseen for a day with their subscriptions, once however many run at once, and keeps the others', async () => {
      const session = (id: string, seenMsAgo: number) => ({
        id: `mcps-test-${id}`,
        account_id: person.accountId,
        client_id: 'client-test',
        created_at: ago(seenMsAgo + HOUR),
        last_seen_at: ago(seenMsAgo),
      });
      await db()
        .insertInto('mcp_sessions')
        .values([
          session('idle-long', MCP_SESSION_IDLE_MS + HOUR),
          session('idle-exactly', MCP_SESSION_IDLE_MS),
          session('seen-lately', MCP_SESSION_IDLE_MS - 60_000),
        ])
        .execute();
      await db()
        .insertInto('mcp_session_subscriptions')
        .values([
          { session_id: 'mcps-test-idle-long', uri: 'content-service://articles/art_1' },
          { session_id: 'mcps-test-seen-lately', uri: 'content-service://articles/art_1' },
        ])
        .execute();
      const runs = await Promise.all([
        purgeExpiredSessions({ db: db(), now: () => NOW }),
        purgeExpiredSessions({ db: db(), now: () => NOW }),
      ]);
      expect(runs[0].mcpSessions + runs[1].mcpSessions).toBe(2);
      const left = await db()
        .selectFrom('mcp_sessions')
        .select('id')
        .where('id', 'like', 'mcps-test-%')
        .execute();
      expect(left.map((r) => r.id)).toEqual(['mcps-test-seen-lately']);
      const subscriptions = await db()
        .selectFrom('mcp_session_subscriptions')
        .select('session_id')
        .where('session_id', 'like', 'mcps-test-%')
        .execute();
      expect(subscriptions.map((r) => r.session_id)).toEqual(['mcps-test-seen-lately']);
    });
  });

  describe('idempotency records and stored images, twice at once', () => {
    it('purges each idempotency record older than 24 hours once, and keeps the younger', async () => {
      const record = (key: string, hoursAgo: number) => ({
        account_id: person.accountId,
        key,
        request_hash: 'h'.repeat(64),
        status: 200,
        headers: JSON.stringify({}),
        body: JSON.stringify({ revision: 2 }),
        created_at: new Date(Date.now() - hoursAgo * HOUR),
      });
      await db()
        .insertInto('idempotency_keys')
        .values([record('old-1', 25), record('old-2', 24 * 7), record('old-3', 48), record('young', 23)])
        .execute();
      const runs = await Promise.all([
        purgeIdempotency({ db: db(), now: () => new Date() }),
        purgeIdempotency({ db: db(), now: () => new Date() }),
      ]);
      expect(runs[0].purged + runs[1].purged).toBe(3);
      const left = await db()
        .selectFrom('idempotency_keys')
        .select('key')
        .where('account_id', '=', person.accountId)
        .execute();
      expect(left.map((r) => r.key)).toEqual(['young']);
    });

    it('removes each unreferenced old image once, and keeps the young ones', async () => {
      const dir = await mkdtemp(path.join(tmpdir(), 'cs-housekeeping-twice-'));
      try {
        const media = createDirectoryMediaStore(dir);
        const keys: string[] = [];
        for (const [i, hoursAgo] of [30, 40, 50, 1].entries()) {
          const bytes = await sharp({
            create: { width: 4, height: 4, channels: 3, background: `#0000${i}0` },
          })
            .png()
            .toBuffer();
          const put = await media.put(bytes, 'png', 'image/png');
          const at = new Date(Date.now() - hoursAgo * HOUR);
          await utimes(path.join(dir, put.key.slice(0, 2), put.key), at, at);
          keys.push(put.key);
        }
        const runs = await Promise.all([
          collectMedia({ db: db(), media, now: () => new Date() }),
          collectMedia({ db: db(), media, now: () => new Date() }),
        ]);
        expect(runs[0].removed + runs[1].removed).toBe(3);
        const files = (await readdir(dir, { recursive: true, withFileTypes: true })).filter((e) =>
          e.isFile(),
        );
        expect(files.map((f) => f.name)).toEqual([keys[3]]);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  });

  describe.each(queueKinds)('as jobs on the %s queue', (kind) => {
    it('declares the five jobs on the maintenance queue with their schedules, and runs them', async () => {
      const background = await startTestBackground(kind, t.runtime, [housekeepingJobs]);
      try {
        const [module] = background.modules;
        expect(module?.kinds.map((k) => [k.name, k.queue])).toEqual([
          ['housekeeping.idempotency', 'maintenance'],
          ['housekeeping.media', 'maintenance'],
          ['housekeeping.oauth-clients', 'maintenance'],
          ['housekeeping.sessions', 'maintenance'],
          ['housekeeping.search-index', 'maintenance'],
        ]);
        // Only the merge, every 10 s, leaves a failed run to its next one (no retries, no dead letters).
        expect(module?.kinds.filter((k) => k.retriedByNextRun).map((k) => k.name)).toEqual([
          'housekeeping.search-index',
        ]);
        expect(module?.repeats?.map((r) => [r.id, r.name, r.repeat])).toEqual([
          ['housekeeping.idempotency', 'housekeeping.idempotency', { everyMs: HOUR }],
          ['housekeeping.media', 'housekeeping.media', { everyMs: 6 * HOUR }],
          ['housekeeping.oauth-clients', 'housekeeping.oauth-clients', { everyMs: DAY }],
          ['housekeeping.sessions', 'housekeeping.sessions', { everyMs: HOUR }],
          ['housekeeping.search-index', 'housekeeping.search-index', { everyMs: 10_000 }],
        ]);
        // An article's words wait in the search indexes' pending lists: the merge has them to move.
        await addSiteWithArticle(t.runtime, person.accountId);

        const id = `ended-${kind}`;
        await db()
          .insertInto('web_sessions')
          .values({
            id_hash: id,
            account_id: person.accountId,
            created_at: new Date(Date.now() - 2 * HOUR),
            expires_at: new Date(Date.now() - HOUR),
          })
          .execute();
        for (const k of module?.kinds ?? []) await background.jobs.add(k.name, {});
        await background.settled();
        expect(background.failures()).toEqual([]);
        const done = background.logs
          .filter((l) => l.msg === 'housekeeping done')
          .map((l) => (l.obj as { job: string }).job);
        expect(done.sort()).toEqual(module?.kinds.map((k) => k.name).sort());
        const left = await db()
          .selectFrom('web_sessions')
          .select('id_hash')
          .where('id_hash', '=', id)
          .execute();
        expect(left).toEqual([]);
      } finally {
        await background.close();
      }
    });
  });
});
