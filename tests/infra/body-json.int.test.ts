import fc from 'fast-check';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Runtime } from '../../apps/runtime.ts';
import * as migration from '../../infra/db/migrations/2026-11-27-017-body-json.ts';
import { findArticle, findArticleJson } from '../../projections/articles.ts';
import { backends, onPostgres } from '../support/db.ts';
import {
  addSiteWithArticle,
  apiKeyActor,
  createTestRuntime,
  protectedBody,
  setUpAccount,
} from '../support/runtime.ts';

/*
 * `article_bodies.body_json` (migration 017): the body's JSON text, made by PostgreSQL when the body is
 * stored, which the API's article answer embeds as it is. It must be the text `JSON.stringify` writes,
 * for any body, on both backends, and follow every change of the body.
 */
describe.each(backends)('the body stored as JSON text on %s', (backend) => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime(backend));
  }, 60_000);
  afterAll(async () => drop?.());

  const jsonString = async (value: string): Promise<string> =>
    (await sql<{ text: string }>`select json_string(${value}) as text`.execute(runtime.db)).rows[0]?.text ??
    '';

  it('is what JSON.stringify writes, for any text PostgreSQL can hold', async () => {
    // Every code point but NUL (a PostgreSQL text cannot hold it): controls, quotes, backslashes, the
    // line and paragraph separators, astral characters.
    const text = fc.string({
      unit: fc.oneof(
        fc.constantFrom('"', '\\', '/', '\b', '\f', '\n', '\r', '\t', '\u007f', '\u2028', '\u2029', '<', '&'),
        fc.integer({ min: 1, max: 0x1f }).map((c) => String.fromCharCode(c)),
        fc
          .integer({ min: 1, max: 0x10ffff })
          .filter((c) => c < 0xd800 || c > 0xdfff)
          .map((c) => String.fromCodePoint(c)),
      ),
      maxLength: 200,
    });
    await fc.assert(
      fc.asyncProperty(text, async (value) => {
        expect(await jsonString(value)).toBe(JSON.stringify(value));
      }),
      { numRuns: backend === 'pglite' ? 150 : 400 },
    );
  });

  it('follows the body through creation and edits, and is read with the article', async () => {
    const { accountId } = await setUpAccount(runtime);
    const { articleId } = await addSiteWithArticle(runtime, accountId);
    const caller = { origin: 'api', actor: apiKeyActor } as const;
    const agree = async () => {
      const plain = await findArticle(runtime.db, accountId, articleId);
      const json = await findArticleJson(runtime.db, accountId, articleId);
      expect(plain && json).toBeTruthy();
      expect(json?.body_json).toBe(JSON.stringify(plain?.body));
      const { body: _, ...rest } = plain ?? { body: '' };
      const { body_json: __, ...restJson } = json ?? { body_json: '' };
      expect(restJson).toEqual(rest);
      return plain?.body;
    };
    const created = await agree();
    await runtime.commands.editArticle(accountId, articleId, { title: 'A title alone' }, caller);
    expect(await agree()).toBe(created);
    const body = `${created}<p>"Quoted", back\\slashed,\ttabbed\nand 😀.</p>`;
    await runtime.commands.editArticle(accountId, articleId, { body }, caller);
    expect(await agree()).toBe(body);
  });

  it('is made for the bodies already stored when the migration runs', async () => {
    const { accountId } = await setUpAccount(runtime, 'Migrated Ltd');
    const { articleId } = await addSiteWithArticle(runtime, accountId);
    await migration.down(runtime.db);
    await expect(findArticleJson(runtime.db, accountId, articleId)).rejects.toThrow(/body_json/);
    await migration.up(runtime.db);
    const json = await findArticleJson(runtime.db, accountId, articleId);
    expect(json?.body_json).toBe(JSON.stringify((await findArticle(runtime.db, accountId, articleId))?.body));
  });

  onPostgres(backend)(
    'is compressed as the body is, lz4, also for the bodies the migration found',
    async () => {
      const { accountId } = await setUpAccount(runtime, 'Long Bodies Ltd');
      const { articleId } = await addSiteWithArticle(runtime, accountId);
      const long = `${protectedBody(1)}${Array.from({ length: 60 }, (_, n) => `<p>Paragraph ${n} of a long article.</p>`).join('')}`;
      await runtime.commands.editArticle(
        accountId,
        articleId,
        { body: long },
        { origin: 'api', actor: apiKeyActor },
      );
      const compression = async () =>
        (
          await sql<{ body: string | null; json: string | null }>`
          select pg_column_compression(body) as body, pg_column_compression(body_json) as json
          from article_bodies where article_id = ${articleId}`.execute(runtime.db)
        ).rows[0];
      expect(await compression()).toEqual({ body: 'lz4', json: 'lz4' });
      await migration.down(runtime.db);
      await migration.up(runtime.db);
      expect(await compression()).toEqual({ body: 'lz4', json: 'lz4' });
    },
  );
});
