import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Runtime } from '../../apps/runtime.ts';
import * as migration from '../../infra/db/migrations/2026-11-23-013-activity-revision.ts';
import { listActivity } from '../../projections/activity.ts';
import { backends } from '../support/db.ts';
import { apiKeyActor, createTestRuntime, protectedBody, setUpAccount } from '../support/runtime.ts';

/*
 * Migration 013 on a database that has records from before it: calls' records name no revision, the
 * pipeline's changes get their own (as a rebuild would give them).
 */
describe.each(backends)('migration 013 (activity.revision) on %s', (backend) => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime(backend));
  }, 60_000);
  afterAll(async () => drop?.());

  it('gives the pipeline rows their event’s revision and leaves calls null', async () => {
    const { accountId, siteId } = await setUpAccount(runtime);
    const { articleId } = await runtime.commands.createArticle(
      accountId,
      {
        siteId,
        title: 'Boilers',
        body: protectedBody(1),
        url: 'https://northside.example/boilers',
        status: 'published',
        publishedAt: '2026-11-01T09:00:00.000Z',
        targetKeyword: null,
        featuredImage: null,
      },
      { origin: 'rewrite', actor: apiKeyActor },
    );
    await runtime.commands.editArticle(
      accountId,
      articleId,
      { title: 'Boilers, serviced' },
      { origin: 'rewrite', actor: apiKeyActor },
    );
    await runtime.commands.recordCall({
      accountId,
      source: 'api',
      actor: apiKeyActor,
      operation: 'update_article',
      siteId,
      articleId,
      status: 200,
      requestId: 'req_before',
      durationMs: 2,
    });
    const revisions = async () =>
      (await listActivity(runtime.db, accountId, { page: 1, perPage: 100 })).rows
        .map((r) => [r.source, r.operation, r.revision])
        .sort();
    const projected = await revisions();
    expect(projected).toEqual([
      ['api', 'update_article', null],
      ['rewrite', 'create_article', 1],
      ['rewrite', 'update_article', 2],
    ]);

    // As before the migration: no column.
    await migration.down(runtime.db);
    expect(
      (await sql<{ n: number }>`select count(*)::int as n from activity`.execute(runtime.db)).rows[0]?.n,
    ).toBe(3);
    await migration.up(runtime.db);
    expect(await revisions()).toEqual(projected);
  });
});
