import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Call, callOf, type Principal } from '../../apps/application/call.ts';
import { type Application, createApplication } from '../../apps/application/index.ts';
import { parseRfc3339, webhookUrlProblem } from '../../apps/application/webhooks.ts';
import type { Runtime } from '../../apps/runtime.ts';
import { DomainError } from '../../domain/errors.ts';
import type { Db } from '../../infra/db/schema.ts';
import { allowNetworks } from '../../infra/media/fetch.ts';
import { createDirectoryMediaStore } from '../../infra/media/store.ts';
import { backends } from '../support/db.ts';
import { type Answering, answering, refusal, type Throwing, throwing } from '../support/errors.ts';
import { apiKeyActor, createTestRuntime, setUpAccount } from '../support/runtime.ts';

/*
 * The webhook endpoint use cases (CONTRACT "Webhooks") against the real tables: registering with its
 * URL, event and description rules and the limit of 10, the secret shown once, tenancy, enabling and
 * disabling, deleting, the deliveries list (rows and attempts inserted here, as the delivery engine
 * writes them), redelivery. Sending is the delivery engine's and not run here.
 */

/** The field a refusal names, with its code (`accepted` when the promise resolves). */
async function refusedField(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    const first = error.errors?.[0];
    return `${error.code}${first && 'field' in first ? `:${first.field}` : ''}`;
  }
  return 'accepted';
}

describe.each(backends)('the webhook use cases on %s', (backend) => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  let clock = new Date('2026-11-20T12:00:00Z');
  let app: Application;
  /** The webhook use cases, answering their values (a write's, replayed or not) and throwing their refusals. */
  let hooks: Answering<Throwing<Application['webhooks']>>;
  let db: Db;

  const principal = (accountId: string, scope: 'read' | 'write' = 'write'): Principal => ({
    accountId,
    actor: apiKeyActor,
    origin: 'api',
    scope,
  });
  const as = (accountId: string, scope: 'read' | 'write' = 'write'): Call =>
    callOf(principal(accountId, scope));
  const openAccount = async (name: string): Promise<string> =>
    (
      await runtime.commands.openAccount({
        name,
        email: `${name.toLowerCase().replace(/[^a-z]+/g, '.')}.${Math.random().toString(36).slice(2, 8)}@example.com`,
      })
    ).accountId;

  const hook = { url: 'https://hooks.example.com/content', events: ['article.published'] };

  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime(backend));
    db = runtime.db;
    app = createApplication({
      db,
      commands: runtime.commands,
      publicUrl: 'https://content.example',
      now: () => clock,
      editLimit: {
        take: async () => ({
          policy: { name: 'edits', quota: 1, window: 'utc-day' },
          allowed: true,
          remaining: 1,
          resetSeconds: 1,
        }),
      },
      media: createDirectoryMediaStore('/nonexistent'),
      fetchImage: async () => new Uint8Array(),
      allowOutbound: allowNetworks(['10.20.0.0/16']),
    });
    hooks = answering(throwing(app.webhooks));
  });
  afterAll(async () => {
    await drop?.();
  });

  /** A delivery row as the delivery engine writes it. */
  async function insertDelivery(
    endpoint: { id: string; accountId: string },
    n: number,
    extra: Partial<{ status: 'pending' | 'succeeded' | 'failed'; attempts: number }> = {},
  ): Promise<string> {
    const id = `dlv_test_${endpoint.id}_${n}`;
    await db
      .insertInto('webhook_deliveries')
      .values({
        id,
        endpoint_id: endpoint.id,
        account_id: endpoint.accountId,
        event_id: `evt-${n}`,
        event_type: 'article.published',
        payload: JSON.stringify({ id: `evt-${n}`, type: 'article.published', created_at: 'x', data: { n } }),
        source: 'live',
        source_id: null,
        status: extra.status ?? 'succeeded',
        attempts: extra.attempts ?? 1,
        next_attempt_at: new Date(`2026-11-0${n}T10:00:00Z`),
        last_attempt_at: new Date(`2026-11-0${n}T10:00:01Z`),
        last_status_code: 200,
        last_duration_ms: 40 + n,
        last_error: null,
        delivered_at:
          extra.status === 'succeeded' || extra.status === undefined
            ? new Date(`2026-11-0${n}T10:00:01Z`)
            : null,
        created_at: new Date(`2026-11-0${n}T10:00:00Z`),
      })
      .execute();
    return id;
  }

  describe('registering', () => {
    it('answers the endpoint with its secret, once: later answers and lists never carry it', async () => {
      const account = await openAccount('Secret Ltd');
      const created = await hooks.create(as(account), {
        url: 'https://hooks.example.com/content?team=7',
        events: ['article.published', 'report.ready'],
        description: 'Team chat',
      });
      expect(created).toEqual({
        id: expect.stringMatching(/^whe_/),
        url: 'https://hooks.example.com/content?team=7',
        events: ['article.published', 'report.ready'],
        description: 'Team chat',
        enabled: true,
        disabled_reason: null,
        disabled_at: null,
        created_at: '2026-11-20T12:00:00Z',
        updated_at: '2026-11-20T12:00:00Z',
        secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{32}$/),
      });
      // The Standard Webhooks format: base64 of 24 random bytes; the table holds it to sign with.
      expect(Buffer.from(created.secret.slice('whsec_'.length), 'base64')).toHaveLength(24);
      const stored = await db
        .selectFrom('webhook_endpoints')
        .select('secret')
        .where('id', '=', created.id)
        .executeTakeFirstOrThrow();
      expect(stored.secret).toBe(created.secret);

      const got = await hooks.get(as(account), created.id);
      expect(got).not.toHaveProperty('secret');
      const { secret: _secret, ...withoutSecret } = created;
      expect(got).toEqual(withoutSecret);
      const listed = await hooks.list(as(account), { page: 1, per_page: 20 });
      expect(listed.data).toEqual([withoutSecret]);
      expect(JSON.stringify(listed)).not.toContain(created.secret);
      // Two endpoints never share a secret.
      const other = await hooks.create(as(account), hook);
      expect(other.secret).not.toBe(created.secret);
    });

    it('refuses URLs that are not absolute https, carry credentials or name an address it may not reach', async () => {
      const account = await openAccount('Rules Ltd');
      const url = (u: string) => refusedField(hooks.create(as(account), { ...hook, url: u }));
      expect(await url('/relative/path')).toBe('invalid_request:url');
      expect(await url('hooks.example.com/content')).toBe('invalid_request:url');
      expect(await url('ftp://hooks.example.com/')).toBe('invalid_request:url');
      expect(await url('http://hooks.example.com/content')).toBe('invalid_request:url');
      expect(await url('http://8.8.8.8/content')).toBe('invalid_request:url');
      expect(await url('https://user:pass@hooks.example.com/')).toBe('invalid_request:url');
      expect(await url('https://token@hooks.example.com/')).toBe('invalid_request:url');
      expect(await url('https://hooks.example.com/a b')).toBe('invalid_request:url');
      expect(await url('https://hooks.example.com/a\nb')).toBe('invalid_request:url');
      expect(await url(`https://hooks.example.com/${'a'.repeat(2048)}`)).toBe('invalid_request:url');
      // IP literals outside OUTBOUND_ALLOW_NETWORKS (here 10.20.0.0/16): private, loopback, link-local.
      expect(await url('https://127.0.0.1/hook')).toBe('invalid_request:url');
      expect(await url('https://[::1]/hook')).toBe('invalid_request:url');
      expect(await url('http://192.168.1.10/hook')).toBe('invalid_request:url');
      expect(await url('https://169.254.169.254/latest')).toBe('invalid_request:url');
      expect(await url('https://2130706433/hook')).toBe('invalid_request:url');
      // Inside the allowed networks http is fine; a public address literal is fine over https.
      expect(await url('http://10.20.3.4:8080/hook')).toBe('accepted');
      expect(await url('https://10.20.3.4/hook')).toBe('accepted');
      expect(await url('https://8.8.8.8/hook')).toBe('accepted');
      expect(await url('https://hooks.example.com:8443/in')).toBe('accepted');
      const stored = await hooks.list(as(account), { page: 1, per_page: 20 });
      // One clock tick for all: same created_at, so their order is by id; compare as a set.
      expect(stored.data.map((e) => e.url).sort()).toEqual([
        'http://10.20.3.4:8080/hook',
        'https://10.20.3.4/hook',
        'https://8.8.8.8/hook',
        'https://hooks.example.com:8443/in',
      ]);
    });

    it('says what is wrong with a URL in words a person can act on', () => {
      expect(webhookUrlProblem('http://hooks.example.com/')).toMatch(/https/);
      expect(webhookUrlProblem('https://a:b@hooks.example.com/')).toMatch(/user name or password/);
      expect(webhookUrlProblem('https://10.0.0.1/')).toMatch(/private/);
      expect(webhookUrlProblem('http://10.0.0.1/', allowNetworks(['10.0.0.0/8']))).toBeNull();
      expect(webhookUrlProblem('hooks')).toMatch(/absolute URL/);
    });

    it('refuses events that are missing, unknown or repeated, and long or broken descriptions', async () => {
      const account = await openAccount('Events Ltd');
      const create = (input: Record<string, unknown>) =>
        refusedField(hooks.create(as(account), { ...hook, ...input } as typeof hook));
      expect(await create({ events: [] })).toBe('invalid_request:events');
      expect(await create({ events: ['article.deleted'] })).toBe('invalid_request:events');
      expect(await create({ events: ['report.ready', 'report.ready'] })).toBe('invalid_request:events');
      expect(await create({ description: 'x'.repeat(501) })).toBe('invalid_request:description');
      expect(await create({ description: 'bell\u0007' })).toBe('invalid_request:description');
      expect(await create({ description: 'x'.repeat(500) })).toBe('accepted');
      expect(
        await create({
          events: [
            'article.created',
            'article.updated',
            'article.featured_image_replaced',
            'article.published',
            'backlink.acquired',
            'report.ready',
          ],
        }),
      ).toBe('accepted');
      expect((await hooks.list(as(account), { page: 1, per_page: 20 })).meta.total).toBe(2);
    });

    it('keeps at most 10 endpoints per account, even when they are added at once', async () => {
      const account = await openAccount('Many Ltd');
      const results = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          refusal(hooks.create(as(account), { ...hook, url: `https://hooks.example.com/${i}` })),
        ),
      );
      expect(results.filter((r) => r === 'accepted')).toHaveLength(10);
      expect(results.filter((r) => r === 'conflict')).toHaveLength(2);
      const error = await hooks.create(as(account), hook).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(DomainError);
      expect((error as DomainError).message).toMatch(/10 webhook endpoints.*delete one/);
      // Another account has its own 10; deleting one makes room again.
      expect(await refusal(hooks.create(as(await openAccount('Few Ltd')), hook))).toBe('accepted');
      const first = (await hooks.list(as(account), { page: 1, per_page: 20 })).data[0];
      await hooks.remove(as(account), first?.id as string);
      expect(await refusal(hooks.create(as(account), hook))).toBe('accepted');
      expect((await hooks.list(as(account), { page: 1, per_page: 20 })).meta.total).toBe(10);
    });
  });

  describe('tenancy and grants', () => {
    it("answers another account's endpoint exactly like one that does not exist", async () => {
      const mine = await openAccount('Mine Ltd');
      const theirs = await openAccount('Theirs Ltd');
      const endpoint = await hooks.create(as(theirs), hook);
      const delivery = await insertDelivery({ id: endpoint.id, accountId: theirs }, 1);
      const id = endpoint.id;
      const me = as(mine);
      expect(await refusal(hooks.get(me, id))).toBe('not_found');
      expect(await refusal(hooks.update(me, id, { enabled: false }))).toBe('not_found');
      expect(await refusal(hooks.remove(me, id))).toBe('not_found');
      expect(await refusal(hooks.deliveries(me, id, { page: 1, per_page: 20 }))).toBe('not_found');
      expect(await refusal(hooks.redeliver(me, id, delivery))).toBe('not_found');
      expect(await refusal(hooks.replay(me, id, { from: '2026-11-01T00:00:00Z' }))).toBe('not_found');
      expect(await refusal(hooks.get(me, 'whe_nope'))).toBe('not_found');
      expect((await hooks.list(me, { page: 1, per_page: 20 })).data).toEqual([]);
      // Nothing of theirs changed.
      const still = await hooks.get(as(theirs), id);
      expect(still.enabled).toBe(true);
      const rows = await db
        .selectFrom('webhook_deliveries')
        .select('id')
        .where('endpoint_id', '=', id)
        .execute();
      expect(rows).toHaveLength(1);
    });

    it('needs a write grant for every webhook use case, reads included', async () => {
      const account = await openAccount('Reader Ltd');
      const endpoint = await hooks.create(as(account), hook);
      const reader = as(account, 'read');
      const calls: Promise<unknown>[] = [
        app.webhooks.create(reader, hook),
        app.webhooks.list(reader, { page: 1, per_page: 20 }),
        app.webhooks.get(reader, endpoint.id),
        app.webhooks.update(reader, endpoint.id, { enabled: false }),
        app.webhooks.remove(reader, endpoint.id),
        app.webhooks.deliveries(reader, endpoint.id, { page: 1, per_page: 20 }),
        app.webhooks.redeliver(reader, endpoint.id, 'dlv_x'),
        app.webhooks.replay(reader, endpoint.id, { from: '2026-11-01T00:00:00Z' }),
      ];
      for (const call of calls) expect(await refusal(call)).toBe('insufficient_scope');
      expect((await hooks.get(as(account), endpoint.id)).enabled).toBe(true);
    });
    it('confirms an API key the adapter left unconfirmed, refusing a revoked one', async () => {
      const account = await openAccount('Key Ltd');
      const { keyId } = await runtime.commands.createApiKey(account, { name: 'Hooks', scope: 'write' });
      const withKey = (): Call => callOf({ ...principal(account), liveKey: keyId });
      expect(await refusal(hooks.create(withKey(), hook))).toBe('accepted');
      await runtime.commands.revokeApiKey(account, keyId);
      expect(await refusal(hooks.list(withKey(), { page: 1, per_page: 20 }))).toBe('unauthenticated');
      expect(await refusal(hooks.create(withKey(), hook))).toBe('unauthenticated');
      expect((await hooks.list(as(account), { page: 1, per_page: 20 })).meta.total).toBe(1);
    });
  });

  describe('changing (PATCH)', () => {
    it('disables with the account as the reason, and enabling clears the reason, the time and the failure streak', async () => {
      const account = await openAccount('Toggle Ltd');
      const endpoint = await hooks.create(as(account), hook);
      clock = new Date('2026-11-21T08:00:00Z');
      const off = await hooks.update(as(account), endpoint.id, { enabled: false });
      expect(off).toMatchObject({
        enabled: false,
        disabled_reason: 'account',
        disabled_at: '2026-11-21T08:00:00Z',
        updated_at: '2026-11-21T08:00:00Z',
        created_at: '2026-11-20T12:00:00Z',
      });
      // Disabling again keeps when (and why) it was disabled.
      clock = new Date('2026-11-22T08:00:00Z');
      const again = await hooks.update(as(account), endpoint.id, { enabled: false });
      expect(again).toMatchObject({ disabled_reason: 'account', disabled_at: '2026-11-21T08:00:00Z' });

      // The delivery engine disabled it: it answered 410.
      await db
        .updateTable('webhook_endpoints')
        .set({
          disabled_reason: 'gone',
          disabled_at: new Date('2026-11-22T09:00:00Z'),
          failing_since: new Date('2026-11-22T08:59:00Z'),
        })
        .where('id', '=', endpoint.id)
        .execute();
      expect(await hooks.get(as(account), endpoint.id)).toMatchObject({
        enabled: false,
        disabled_reason: 'gone',
        disabled_at: '2026-11-22T09:00:00Z',
      });
      // Enabled again: a kick that cannot run yet does not fail the call (the sweep finds the work).
      const on = await hooks.update(as(account), endpoint.id, { enabled: true });
      expect(on).toMatchObject({ enabled: true, disabled_reason: null, disabled_at: null });
      const row = await db
        .selectFrom('webhook_endpoints')
        .select(['failing_since', 'enabled'])
        .where('id', '=', endpoint.id)
        .executeTakeFirstOrThrow();
      expect(row).toEqual({ failing_since: null, enabled: true });
    });

    it('keeps the failure streak of an endpoint that is enabled already', async () => {
      const account = await openAccount('Streak Ltd');
      const endpoint = await hooks.create(as(account), hook);
      const since = new Date('2026-11-19T00:00:00Z');
      await db
        .updateTable('webhook_endpoints')
        .set({ failing_since: since })
        .where('id', '=', endpoint.id)
        .execute();
      await hooks.update(as(account), endpoint.id, { enabled: true });
      const row = await db
        .selectFrom('webhook_endpoints')
        .select('failing_since')
        .where('id', '=', endpoint.id)
        .executeTakeFirstOrThrow();
      expect(row.failing_since?.toISOString()).toBe(since.toISOString());
    });

    it('changes the URL, the events and the description, under the rules of registering', async () => {
      const account = await openAccount('Patch Ltd');
      const endpoint = await hooks.create(as(account), { ...hook, description: 'old' });
      const changed = await hooks.update(as(account), endpoint.id, {
        url: 'https://other.example.com/in',
        events: ['backlink.acquired', 'report.ready'],
      });
      expect(changed).toMatchObject({
        url: 'https://other.example.com/in',
        events: ['backlink.acquired', 'report.ready'],
        description: 'old',
        enabled: true,
      });
      expect((await hooks.update(as(account), endpoint.id, { description: null })).description).toBeNull();
      const patch = (input: Record<string, unknown>) =>
        refusedField(hooks.update(as(account), endpoint.id, input));
      expect(await patch({})).toBe('invalid_request:url');
      expect(await patch({ url: 'http://other.example.com/' })).toBe('invalid_request:url');
      expect(await patch({ events: [] })).toBe('invalid_request:events');
      expect(await patch({ description: 'y'.repeat(501) })).toBe('invalid_request:description');
      expect(await hooks.get(as(account), endpoint.id)).toMatchObject({
        url: 'https://other.example.com/in',
        events: ['backlink.acquired', 'report.ready'],
        description: null,
      });
    });

    it('deletes an endpoint with its deliveries and their attempts', async () => {
      const account = await openAccount('Delete Ltd');
      const endpoint = await hooks.create(as(account), hook);
      const delivery = await insertDelivery({ id: endpoint.id, accountId: account }, 1);
      await db
        .insertInto('webhook_attempts')
        .values({
          delivery_id: delivery,
          attempt: 1,
          at: new Date(),
          status_code: 200,
          duration_ms: 5,
          error: null,
        })
        .execute();
      await hooks.remove(as(account), endpoint.id);
      expect(await refusal(hooks.get(as(account), endpoint.id))).toBe('not_found');
      expect(await refusal(hooks.remove(as(account), endpoint.id))).toBe('not_found');
      const deliveries = await db
        .selectFrom('webhook_deliveries')
        .select('id')
        .where('id', '=', delivery)
        .execute();
      const attempts = await db
        .selectFrom('webhook_attempts')
        .select('attempt')
        .where('delivery_id', '=', delivery)
        .execute();
      expect([deliveries, attempts]).toEqual([[], []]);
    });
  });

  describe('deliveries', () => {
    it('lists them newest first with their latest 10 attempts, page by page', async () => {
      const account = await openAccount('Deliveries Ltd');
      const endpoint = await hooks.create(as(account), hook);
      const other = await hooks.create(as(account), { ...hook, url: 'https://other.example.com/' });
      const ids: string[] = [];
      for (let n = 1; n <= 3; n++) ids.push(await insertDelivery({ id: endpoint.id, accountId: account }, n));
      await insertDelivery({ id: other.id, accountId: account }, 4);
      // The second delivery: 12 attempts, the last a success after 11 failures.
      await db
        .insertInto('webhook_attempts')
        .values(
          Array.from({ length: 12 }, (_, i) => ({
            delivery_id: ids[1] as string,
            attempt: i + 1,
            at: new Date(Date.UTC(2026, 10, 2, 10, i)),
            status_code: i === 11 ? 200 : i % 2 === 0 ? 503 : null,
            duration_ms: 100 + i,
            error: i === 11 ? null : i % 2 === 0 ? 'HTTP 503' : 'timed out after 10 s',
          })),
        )
        .execute();

      const page = await hooks.deliveries(as(account), endpoint.id, { page: 1, per_page: 2 });
      expect(page.meta).toEqual({ page: 1, per_page: 2, total: 3, total_pages: 2 });
      expect(page.data.map((d) => d.id)).toEqual([ids[2], ids[1]]);
      expect(page.data[0]).toEqual({
        id: ids[2],
        event_id: 'evt-3',
        event_type: 'article.published',
        source: 'live',
        status: 'succeeded',
        attempts: 1,
        next_attempt_at: '2026-11-03T10:00:00Z',
        last_attempt_at: '2026-11-03T10:00:01Z',
        last_status_code: 200,
        last_duration_ms: 43,
        last_error: null,
        delivered_at: '2026-11-03T10:00:01Z',
        created_at: '2026-11-03T10:00:00Z',
        attempt_log: [],
      });
      const log = page.data[1]?.attempt_log ?? [];
      expect(log.map((a) => a.attempt)).toEqual([12, 11, 10, 9, 8, 7, 6, 5, 4, 3]);
      expect(log[0]).toEqual({
        attempt: 12,
        at: '2026-11-02T10:11:00Z',
        status_code: 200,
        duration_ms: 111,
        error: null,
      });
      expect(log[1]).toEqual({
        attempt: 11,
        at: '2026-11-02T10:10:00Z',
        status_code: 503,
        duration_ms: 110,
        error: 'HTTP 503',
      });
      const second = await hooks.deliveries(as(account), endpoint.id, { page: 2, per_page: 2 });
      expect(second.data.map((d) => d.id)).toEqual([ids[0]]);
      const past = await hooks.deliveries(as(account), endpoint.id, { page: 3, per_page: 2 });
      expect(past).toEqual({ data: [], meta: { page: 3, per_page: 2, total: 3, total_pages: 2 } });
    });

    it('redelivers one as a new pending delivery of the same message, after the others', async () => {
      const account = await openAccount('Redeliver Ltd');
      const endpoint = await hooks.create(as(account), hook);
      const other = await hooks.create(as(account), { ...hook, url: 'https://other.example.com/' });
      const original = await insertDelivery({ id: endpoint.id, accountId: account }, 1, {
        status: 'failed',
        attempts: 10,
      });
      await insertDelivery({ id: endpoint.id, accountId: account }, 2);
      clock = new Date('2026-11-23T07:30:00Z');
      // The kick cannot run yet: the new row is what the delivery engine will send.
      const again = await hooks.redeliver(as(account), endpoint.id, original);
      expect(again).toEqual({
        id: expect.stringMatching(/^dlv_/),
        event_id: 'evt-1',
        event_type: 'article.published',
        source: 'redelivery',
        status: 'pending',
        attempts: 0,
        next_attempt_at: '2026-11-23T07:30:00Z',
        last_attempt_at: null,
        last_status_code: null,
        last_duration_ms: null,
        last_error: null,
        delivered_at: null,
        created_at: '2026-11-23T07:30:00Z',
        attempt_log: [],
      });
      const rows = await db
        .selectFrom('webhook_deliveries')
        .select(['id', 'seq', 'source', 'source_id', 'payload', 'endpoint_id', 'account_id', 'claimed_until'])
        .where('endpoint_id', '=', endpoint.id)
        .orderBy('seq')
        .execute();
      expect(rows.map((r) => r.id)).toEqual([original, `dlv_test_${endpoint.id}_2`, again.id]);
      const copy = rows[2];
      const first = rows[0];
      expect(copy).toMatchObject({
        source: 'redelivery',
        source_id: original,
        endpoint_id: endpoint.id,
        account_id: account,
        claimed_until: null,
      });
      expect(copy?.payload).toEqual(first?.payload);
      // Newest first in the list; the original is as it was.
      const listed = await hooks.deliveries(as(account), endpoint.id, { page: 1, per_page: 20 });
      expect(listed.data.map((d) => [d.id, d.status])).toEqual([
        [again.id, 'pending'],
        [`dlv_test_${endpoint.id}_2`, 'succeeded'],
        [original, 'failed'],
      ]);
      // A delivery of another endpoint, or none, is not found through this one.
      const elsewhere = await insertDelivery({ id: other.id, accountId: account }, 3);
      expect(await refusal(hooks.redeliver(as(account), endpoint.id, elsewhere))).toBe('not_found');
      expect(await refusal(hooks.redeliver(as(account), endpoint.id, 'dlv_nope'))).toBe('not_found');
    });
  });

  describe('replay', () => {
    it('refuses a from that is not an RFC 3339 time, or in the future', async () => {
      const account = await openAccount('Replay Ltd');
      const endpoint = await hooks.create(as(account), hook);
      clock = new Date('2026-11-23T07:30:00Z');
      const replay = (from: string) => refusedField(hooks.replay(as(account), endpoint.id, { from }));
      expect(await replay('2026-11-01')).toBe('invalid_request:from');
      expect(await replay('yesterday')).toBe('invalid_request:from');
      expect(await replay('2026-11-01T10:00:00')).toBe('invalid_request:from');
      expect(await replay('2026-02-30T10:00:00Z')).toBe('invalid_request:from');
      expect(await replay('2026-11-23T07:30:01Z')).toBe('invalid_request:from');
      expect(await replay('2026-11-23T09:00:00+01:00')).toBe('invalid_request:from');
    });

    it('reads RFC 3339 times with their offset', () => {
      expect(parseRfc3339('2026-11-23T09:00:00+01:00')?.toISOString()).toBe('2026-11-23T08:00:00.000Z');
      expect(parseRfc3339('2026-11-23T08:00:00.250Z')?.toISOString()).toBe('2026-11-23T08:00:00.250Z');
      expect(parseRfc3339('2026-11-23 08:00:00Z')).toBeNull();
      expect(parseRfc3339('2026-11-23T24:00:00Z')).toBeNull();
    });

    it('queues the events since `from` as replay deliveries and answers their count', async () => {
      // Which events, in which order and with which bodies: tests/webhooks/messages.int.test.ts.
      const { accountId, siteId } = await setUpAccount(runtime, 'Replay Count Ltd');
      for (const n of [1, 2]) {
        await runtime.commands.createArticle(
          accountId,
          {
            siteId,
            title: `Replayed ${n}`,
            body: `<p>Body ${n}.</p>`,
            url: `https://northside.example/replayed-${n}`,
            status: 'draft',
            publishedAt: null,
            targetKeyword: null,
            featuredImage: null,
          },
          { origin: 'api', actor: apiKeyActor },
        );
      }
      clock = new Date(Date.now() + 60_000);
      const endpoint = await hooks.create(as(accountId), { ...hook, events: ['article.created'] });
      const replayed = await hooks.replay(as(accountId), endpoint.id, {
        from: '2000-01-01T00:00:00Z',
      });
      expect(replayed).toEqual({ replay_id: expect.stringMatching(/^rpl_/), queued: 2 });
      const listed = await hooks.deliveries(as(accountId), endpoint.id, { page: 1, per_page: 10 });
      expect(listed.data.map((d) => [d.source, d.event_type])).toEqual([
        ['replay', 'article.created'],
        ['replay', 'article.created'],
      ]);
    });
  });
});
