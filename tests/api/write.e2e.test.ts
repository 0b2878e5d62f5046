import { request } from 'node:http';
import { parseFragment } from 'parse5';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { recordingClient } from '../support/http.ts';
import { loadOpenApi, validateResponse } from '../support/openapi.ts';
import { cli } from '../support/process.ts';
import { type ServerProcess, startServer } from '../support/server.ts';
import { TEST_REDIS_URL } from '../support/services.ts';
import { PATIENCE } from '../support/wait.ts';

type Seed = { account_id: string; api_key: string; sites: { id: string }[] };
type Change = {
  id: string;
  title: string;
  body: string;
  revision: number;
  changed: boolean;
  sanitized: { path: string; removed: string; reason: string }[];
  protected_links: { id: string }[];
};
type Problem = { status: number; code: string; errors?: { id?: string; change?: string; name?: string }[] };
type List<T> = { data: T[]; meta: { total: number } };
type Revision = {
  revision: number;
  origin: string;
  actor: { type: string; id: string };
  reason: string | null;
  restored_from: number | null;
  title: string;
};

const REDIS_URL = TEST_REDIS_URL;

async function seedAccount(env: Record<string, string>, articles = 12): Promise<Seed> {
  const r = await cli(
    ['seed-demo', '--json', '--sites', '1', '--articles', String(articles), '--backlinks', '0'],
    env,
  );
  if (r.code !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout) as Seed;
}

describe('write API v1 through a real server', () => {
  let db: TestDatabase;
  let env: Record<string, string>;
  let server: ServerProcess;
  let client: ReturnType<typeof recordingClient>;
  let a: Seed;
  let articles: { id: string; body: string }[];
  let next = 0;
  /** A fresh article of account A for each test, with its current body (protected blocks included). */
  const fresh = (): { id: string; body: string } => articles[next++] as { id: string; body: string };

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    env = { DATABASE_URL: db.databaseUrl as string };
    a = await seedAccount(env, 40);
    server = await startServer({ ...env, RATE_LIMIT_PER_MINUTE: '100000', EDIT_LIMIT_PER_DAY: '100000' });
    client = recordingClient(server.url);
    const list = (await client.get(`/api/v1/sites/${a.sites[0]?.id}/articles?per_page=100`, a.api_key))
      .body as List<{ id: string }>;
    articles = [];
    for (const item of list.data) {
      const full = (await client.get(`/api/v1/articles/${item.id}`, a.api_key)).body as {
        id: string;
        body: string;
      };
      articles.push({ id: full.id, body: full.body });
    }
  });
  afterAll(async () => {
    await server?.stop();
    await db?.drop();
  });

  const put = (id: string, body: unknown, headers: Record<string, string> = {}, key?: string) =>
    client.call('PUT', `/api/v1/articles/${id}`, { key: key ?? a.api_key, body, headers });
  const revisionsOf = async (id: string): Promise<Revision[]> =>
    ((await client.get(`/api/v1/articles/${id}/revisions?per_page=100`, a.api_key)).body as List<Revision>)
      .data;

  describe('PUT /articles/{id}', () => {
    it('edits title and body as a new revision with origin api, the key as actor and the reason', async () => {
      const art = fresh();
      const r = await put(art.id, {
        title: 'A better title',
        body: `${art.body}<p>One more paragraph.</p>`,
        reason: 'clearer',
      });
      expect(r.status).toBe(200);
      expect(r.headers.etag).toBe('W/"2"');
      const change = r.body as Change;
      expect(change).toMatchObject({ revision: 2, changed: true, title: 'A better title', sanitized: [] });
      expect(change.body).toContain('One more paragraph.');
      const [latest] = await revisionsOf(art.id);
      expect(latest).toMatchObject({
        revision: 2,
        origin: 'api',
        reason: 'clearer',
        actor: { type: 'api_key' },
        title: 'A better title',
      });
      const got = await client.get(`/api/v1/articles/${art.id}`, a.api_key);
      expect((got.body as Change).body).toBe(change.body);
      // The answer is the article as a read of it gives it, field for field: after an edit of both,
      // of the title only, and one that changes nothing.
      const { changed: _c, sanitized: _s, ...answered } = change;
      expect(got.body).toEqual(answered);
      for (const edit of [{ title: 'Only the title now' }, { title: 'Only the title now' }]) {
        const again = (await put(art.id, edit)).body as Change;
        const { changed: _c2, sanitized: _s2, ...rest } = again;
        expect((await client.get(`/api/v1/articles/${art.id}`, a.api_key)).body).toEqual(rest);
      }
    });

    it('sanitises the body and lists what it removed', async () => {
      const art = fresh();
      const r = await put(art.id, {
        body: `${art.body}<p onclick="steal()">Hi<script>alert(1)</script><a href="javascript:alert(1)">x</a></p><iframe src="https://evil.example"></iframe>`,
      });
      expect(r.status).toBe(200);
      const change = r.body as Change;
      expect(change.body).not.toMatch(/script|onclick|javascript:|iframe/i);
      expect(change.sanitized.map((s) => s.reason)).toEqual(
        expect.arrayContaining(['event_handler', 'unsafe_url']),
      );
      expect(change.sanitized.length).toBeGreaterThanOrEqual(4);
    });

    // Each nested element is one removed item: listed one by one with the whole path of each, a body
    // like this one made an answer (and an edit event) of hundreds of gigabytes.
    it('answers a 1 MiB body of nested unknown elements with at most 100 removed items and a count of the rest', async () => {
      const art = fresh();
      const nested = 256 * 1024;
      const r = await put(art.id, { body: `${art.body}${'<q1>'.repeat(nested)}deep` });
      expect(r.status).toBe(200);
      const change = r.body as Change;
      expect(change.changed).toBe(true);
      expect(change.body).toBe(`${art.body}deep`);
      expect(change.sanitized).toHaveLength(101);
      expect(change.sanitized.slice(0, 100).every((s) => s.reason === 'element_not_allowed')).toBe(true);
      expect(change.sanitized.at(-1)).toMatchObject({
        removed: `${nested - 100} more`,
        reason: 'more_removed',
      });
      expect(JSON.stringify(change.sanitized).length).toBeLessThan(16 * 1024);
      expect(Math.max(...change.sanitized.map((s) => s.path.split(' > ').length))).toBeLessThanOrEqual(9);
    }, 60_000);

    it('refuses removing, rewriting or forging protected blocks with 422, and appends nothing', async () => {
      const art = fresh();
      const ids = [...art.body.matchAll(/data-service-id="([^"]+)"/g)].map((m) => m[1] as string);
      expect(ids.length).toBe(2);
      const removed = await put(art.id, { body: '<p>All links gone.</p>' });
      expect(removed.status).toBe(422);
      expect(removed.body).toMatchObject({ code: 'protected_links_modified' });
      expect((removed.body as Problem).errors).toEqual(ids.sort().map((id) => ({ id, change: 'removed' })));
      const rewritten = await put(art.id, { body: art.body.replace(/>([^<]+)<\/a>/, '>cheap pills</a>') });
      expect(rewritten.status).toBe(422);
      expect((rewritten.body as Problem).errors?.[0]?.change).toBe('rewritten');
      const forged = await put(art.id, {
        body: `${art.body}<p><a href="https://spam.example" data-service-protected="backlink" data-service-id="bl_999">spam</a></p>`,
      });
      expect(forged.status).toBe(422);
      expect((forged.body as Problem).errors).toEqual([{ id: 'bl_999', change: 'forged' }]);
      expect((await revisionsOf(art.id)).length).toBe(1);
      const moved = await put(art.id, {
        body: `<p>New lead.</p>${art.body.split('\n').reverse().join('\n')}`,
      });
      expect(moved.status).toBe(200);
    });

    it('honours If-Match: a stale revision is a 412 and nothing changes; a malformed one is a 400', async () => {
      const art = fresh();
      expect((await put(art.id, { title: 'First' }, { 'if-match': 'W/"1"' })).status).toBe(200);
      const stale = await put(art.id, { title: 'Second' }, { 'if-match': 'W/"1"' });
      expect(stale.status).toBe(412);
      expect(stale.body).toMatchObject({ code: 'revision_mismatch' });
      const bad = await put(art.id, { title: 'Third' }, { 'if-match': 'yesterday' });
      expect(bad.status).toBe(400);
      expect((bad.body as Problem).errors?.[0]?.name).toBe('if-match');
      expect((await revisionsOf(art.id)).length).toBe(2);
      expect((await put(art.id, { title: 'Fourth' }, { 'if-match': '"2"' })).status).toBe(200);
    });

    it('creates no revision for an edit that changes nothing', async () => {
      const art = fresh();
      const r = await put(art.id, { body: art.body });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ changed: false, revision: 1 });
      expect((await revisionsOf(art.id)).length).toBe(1);
    });

    it('replays the first answer to a retry with the same Idempotency-Key, and refuses the key for another body', async () => {
      const art = fresh();
      const first = await put(art.id, { title: 'Once' }, { 'idempotency-key': 'retry-1' });
      const again = await put(art.id, { title: 'Once' }, { 'idempotency-key': 'retry-1' });
      expect(again.status).toBe(200);
      expect(again.body).toEqual(first.body);
      expect(again.headers.etag).toBe(first.headers.etag);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect((await revisionsOf(art.id)).length).toBe(2);
      const other = await put(art.id, { title: 'Twice' }, { 'idempotency-key': 'retry-1' });
      expect(other.status).toBe(400);
      expect((other.body as Problem).errors?.[0]?.name).toBe('idempotency-key');
    });

    it('refuses a read-scoped key with 403 and changes nothing', async () => {
      const art = fresh();
      const k = JSON.parse(
        (await cli(['keys', 'create', '--account', a.account_id, '--scope', 'read'], env)).stdout,
      ) as { api_key: string };
      const r = await put(art.id, { title: 'Nope' }, {}, k.api_key);
      expect(r.status).toBe(403);
      expect(r.body).toMatchObject({ code: 'insufficient_scope' });
      expect((await revisionsOf(art.id)).length).toBe(1);
    });

    it('refuses a key revoked since the server last saw it, before the edit runs', async () => {
      const art = fresh();
      const k = JSON.parse(
        (await cli(['keys', 'create', '--account', a.account_id, '--scope', 'write'], env)).stdout,
      ) as { key_id: string; api_key: string };
      expect((await put(art.id, { title: 'Seen' }, {}, k.api_key)).status).toBe(200);
      expect((await cli(['keys', 'revoke', '--account', a.account_id, '--key', k.key_id], env)).code).toBe(0);
      const r = await put(art.id, { title: 'After revocation' }, {}, k.api_key);
      expect(r.status).toBe(401);
      expect(r.body).toMatchObject({ code: 'unauthenticated' });
      expect(r.headers['www-authenticate']).toContain('Bearer');
      expect((await revisionsOf(art.id)).length).toBe(2);
      // Not a 404 for an article that does not exist, nor a replay with an Idempotency-Key.
      const missing = await put('art_does_not_exist', { title: 'x' }, {}, k.api_key);
      expect(missing.status).toBe(401);
      const keyed = await put(
        art.id,
        { title: 'Keyed' },
        { 'idempotency-key': `revoked-${art.id}` },
        k.api_key,
      );
      expect(keyed.status).toBe(401);
      expect((await revisionsOf(art.id)).length).toBe(2);
    });

    it.each([
      ['an empty object', {}, 'title'],
      ['an empty title', { title: '' }, 'title'],
      ['a title over 300 characters', { title: 'x'.repeat(301) }, 'title'],
      ['an unknown field', { title: 'ok', slug: 'x' }, 'slug'],
      ['a body that is not a string', { body: 42 }, 'body'],
      ['a reason over 1000 characters', { title: 'ok', reason: 'r'.repeat(1001) }, 'reason'],
    ])('refuses %s with a 400 naming it', async (_name, body, field) => {
      const art = articles[0] as { id: string };
      const r = await put(art.id, body);
      expect(r.status).toBe(400);
      expect((r.body as Problem).errors?.map((e) => e.name)).toContain(field);
    });

    it('refuses input nested deeper than 256 levels, malformed JSON and a body over 2 MiB, never crashing', async () => {
      const art = articles[0] as { id: string; body: string };
      const deep = await fetch(`${server.url}/api/v1/articles/${art.id}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${a.api_key}`, 'content-type': 'application/json' },
        body: `{"title":${'['.repeat(100_000)}${']'.repeat(100_000)}}`,
      });
      expect(deep.status).toBe(400);
      const malformed = await fetch(`${server.url}/api/v1/articles/${art.id}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${a.api_key}`, 'content-type': 'application/json' },
        body: '{"title": "x",',
      });
      expect(malformed.status).toBe(400);
      expect(((await malformed.json()) as Problem).code).toBe('invalid_request');
      const big = await put(art.id, { body: `${art.body}<p>${'a'.repeat(2 * 1024 * 1024)}</p>` });
      expect(big.status).toBe(400);
      expect((big.body as Problem).errors?.[0]?.name).toBe('body');
      // Over the 3 MiB request limit: a Content-Length over it is answered 413 before the body is read,
      // so the test sends the headers only and waits for the answer (sending 4 MiB into a connection
      // the server has already answered and closed would race with that close).
      const huge = await new Promise<{ status: number; type: string }>((resolve, reject) => {
        const { port } = new URL(server.url);
        const req = request({
          host: '127.0.0.1',
          port,
          method: 'PUT',
          path: `/api/v1/articles/${art.id}`,
          headers: {
            authorization: `Bearer ${a.api_key}`,
            'content-type': 'application/json',
            'content-length': String(4 * 1024 * 1024),
          },
        });
        req.on('response', (res) => {
          res.resume();
          resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']) });
          req.destroy();
        });
        req.on('error', (error: NodeJS.ErrnoException) => {
          if (error.code !== 'EPIPE' && error.code !== 'ECONNRESET') reject(error);
        });
        req.flushHeaders();
        req.write('{"body":"');
      });
      expect(huge.status).toBe(413);
      expect(huge.type).toContain('application/problem+json');
      const deepHtml = await put(art.id, {
        body: `${art.body}${'<div>'.repeat(50_000)}deep${'</div>'.repeat(50_000)}`,
      });
      expect(deepHtml.status).toBeLessThan(500);
    }, 90_000);
  });

  describe('revisions and restore', () => {
    it('lists revisions, gives the content at n by replay, and restores n as a new revision', async () => {
      const art = fresh();
      await put(art.id, { title: 'Two', body: `${art.body}<p>two</p>`, reason: 'second' });
      await put(art.id, { title: 'Three' });
      const list = await revisionsOf(art.id);
      expect(list.map((r) => r.revision)).toEqual([3, 2, 1]);
      const at2 = (await client.get(`/api/v1/articles/${art.id}/revisions/2`, a.api_key)).body as {
        title: string;
        body: string;
        revision: number;
        reason: string;
      };
      expect(at2).toMatchObject({ revision: 2, title: 'Two', reason: 'second' });
      expect(at2.body).toContain('<p>two</p>');
      expect((await client.get(`/api/v1/articles/${art.id}/revisions/9`, a.api_key)).status).toBe(404);
      expect((await client.get(`/api/v1/articles/${art.id}/revisions/zero`, a.api_key)).status).toBe(400);
      const restored = await client.call('POST', `/api/v1/articles/${art.id}/revisions/1/restore`, {
        key: a.api_key,
        body: { reason: 'undo' },
      });
      expect(restored.status).toBe(200);
      expect(restored.body).toMatchObject({ revision: 4, changed: true, body: art.body });
      expect((await revisionsOf(art.id))[0]).toMatchObject({
        revision: 4,
        restored_from: 1,
        reason: 'undo',
        origin: 'api',
      });
    });

    it('refuses a restore that would remove a protected link added since', async () => {
      const art = fresh();
      const withMore = `${art.body}<p><a href="https://x.example" data-service-protected="internal" data-service-id="il_new">x</a></p>`;
      // Only the pipeline may add protected blocks: simulate it with the ingest CLI.
      const file = `/tmp/rewrite-${art.id}.jsonl`;
      await import('node:fs/promises').then((fs) =>
        fs.writeFile(file, JSON.stringify({ account_id: a.account_id, article_id: art.id, body: withMore })),
      );
      expect((await cli(['ingest', 'rewrites', '--file', file], env)).code).toBe(0);
      const r = await client.call('POST', `/api/v1/articles/${art.id}/revisions/1/restore`, {
        key: a.api_key,
        body: {},
      });
      expect(r.status).toBe(422);
      expect((r.body as Problem).errors).toEqual([{ id: 'il_new', change: 'removed' }]);
    });

    it('names in the activity log the revision each call created, and none for the calls that created none', async () => {
      const art = fresh();
      const tag = `act-${next}`;
      const as = (name: string) => ({ 'x-request-id': `${tag}-${name}` });
      expect((await put(art.id, { title: 'Activity two' }, as('edit'))).status).toBe(200);
      expect((await put(art.id, { title: 'Activity two' }, as('same'))).body).toMatchObject({
        changed: false,
      });
      expect((await client.get(`/api/v1/articles/${art.id}`, a.api_key, as('read'))).status).toBe(200);
      const restore = await client.call('POST', `/api/v1/articles/${art.id}/revisions/1/restore`, {
        key: a.api_key,
        body: {},
        headers: as('restore'),
      });
      expect(restore.body).toMatchObject({ revision: 3 });
      expect((await put(art.id, { title: 'Stale' }, { ...as('stale'), 'if-match': 'W/"1"' })).status).toBe(
        412,
      );
      const once = { 'idempotency-key': `${tag}-idem` };
      expect((await put(art.id, { title: 'Once' }, { ...once, ...as('first') })).status).toBe(200);
      const replay = await put(art.id, { title: 'Once' }, { ...once, ...as('replay') });
      expect(replay.headers['idempotent-replayed']).toBe('true');
      // A change of the content pipeline is a revision of its own.
      const file = `/tmp/rewrite-${art.id}.jsonl`;
      await import('node:fs/promises').then((fs) =>
        fs.writeFile(
          file,
          JSON.stringify({ account_id: a.account_id, article_id: art.id, body: `${art.body}<p>piped</p>` }),
        ),
      );
      expect((await cli(['ingest', 'rewrites', '--file', file], env)).code).toBe(0);

      type Record = { client_request_id: string | null; source: string; revision: number | null };
      const mine = (r: Record): boolean => r.client_request_id?.startsWith(`${tag}-`) ?? false;
      // The calls' records are stored in batches, a moment after their answers.
      const records = await vi.waitFor(async () => {
        const data = (
          (await client.get(`/api/v1/activity?article_id=${art.id}&per_page=100`, a.api_key))
            .body as List<Record>
        ).data;
        expect(data.filter(mine).length).toBeGreaterThanOrEqual(7);
        return data;
      }, PATIENCE);
      const byCall = Object.fromEntries(
        records.filter(mine).map((r) => [r.client_request_id?.slice(tag.length + 1), r.revision]),
      );
      expect(byCall).toEqual({
        edit: 2,
        same: null,
        read: null,
        restore: 3,
        stale: null,
        first: 4,
        replay: null,
      });
      // The pipeline's changes, newest first: its rewrite, and the article's creation (revision 1).
      expect(records.filter((r) => r.source === 'rewrite').map((r) => r.revision)).toEqual([5, 1]);
    });
  });

  describe('concurrency', () => {
    it('20 concurrent PUTs without If-Match all apply: revisions 2..21, the article equals its last revision', async () => {
      const art = fresh();
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => put(art.id, { title: `Concurrent ${i}` })),
      );
      expect(results.map((r) => r.status)).toEqual(Array(20).fill(200));
      const list = await revisionsOf(art.id);
      expect(list.map((r) => r.revision).sort((x, y) => x - y)).toEqual(
        Array.from({ length: 21 }, (_, i) => i + 1),
      );
      const article = (await client.get(`/api/v1/articles/${art.id}`, a.api_key)).body as {
        title: string;
        revision: number;
      };
      expect(article.revision).toBe(21);
      expect(article.title).toBe(list[0]?.title);
    });

    it('20 concurrent PUTs with the same If-Match: exactly one applies, the others get 412', async () => {
      const art = fresh();
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => put(art.id, { title: `Race ${i}` }, { 'if-match': 'W/"1"' })),
      );
      const statuses = results.map((r) => r.status).sort();
      expect(statuses.filter((s) => s === 200)).toHaveLength(1);
      expect(statuses.filter((s) => s === 412)).toHaveLength(19);
      expect((await revisionsOf(art.id)).length).toBe(2);
    });
  });

  describe('attacks', () => {
    const payloads = [
      '<script>alert(1)</script>',
      '<SCRIPT SRC=https://evil.example/xss.js></SCRIPT>',
      '<IMG SRC="javascript:alert(1);">',
      '<IMG SRC=JaVaScRiPt:alert(1)>',
      '<IMG SRC=`javascript:alert(1)`>',
      '<a href="&#106;&#97;&#118;&#97;&#115;&#99;&#114;&#105;&#112;&#116;&#58;alert(1)">x</a>',
      '<a href="&#0000106&#0000097&#0000118&#0000097&#0000115&#0000099&#0000114&#0000105&#0000112&#0000116&#0000058alert(1)">x</a>',
      '<a href="&#x6A&#x61&#x76&#x61&#x73&#x63&#x72&#x69&#x70&#x74&#x3A;alert(1)">x</a>',
      '<a href="jav\tascript:alert(1)">x</a>',
      '<a href="jav&#x09;ascript:alert(1)">x</a>',
      '<a href="jav&#x0A;ascript:alert(1)">x</a>',
      '<a href=" &#14;  javascript:alert(1)">x</a>',
      '<a href="JaVaScRiPt:alert(1)">x</a>',
      '<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">x</a>',
      '<img src="data:image/svg+xml,<svg onload=alert(1)>">',
      '<a href="vbscript:msgbox(1)">x</a>',
      '<BODY ONLOAD=alert(1)>',
      '<img src=x onerror=alert(1)>',
      '<svg/onload=alert(1)>',
      '<svg><script>alert(1)</script></svg>',
      '<math><mtext><table><mglyph><style><img src=x onerror=alert(1)></style></mglyph></table></mtext></math>',
      '<svg></p><style><a id="</style><img src=1 onerror=alert(1)>">',
      '<noscript><p title="</noscript><img src=x onerror=alert(1)>"></noscript>',
      '<template><img src=x onerror=alert(1)></template>',
      '<xmp><img src=x onerror=alert(1)></xmp>',
      '<style>@import "https://evil.example/x.css";</style>',
      '<iframe srcdoc="<script>alert(1)</script>"></iframe>',
      '<iframe src="javascript:alert(1)"></iframe>',
      '<object data="javascript:alert(1)"></object>',
      '<embed src="https://evil.example/x.swf">',
      '<form action="javascript:alert(1)"><button>go</button></form>',
      '<input onfocus=alert(1) autofocus>',
      '<details open ontoggle=alert(1)>',
      '<a href="#" onmouseover="alert(1)">x</a>',
      '<div style="background:url(javascript:alert(1))">x</div>',
      '<base href="javascript:alert(1)//">',
      '<meta http-equiv="refresh" content="0;url=javascript:alert(1)">',
      '<link rel="stylesheet" href="javascript:alert(1)">',
      '<table background="javascript:alert(1)"><tr><td>x</td></tr></table>',
      '<blockquote cite="javascript:alert(1)">x</blockquote>',
      '<img """><script>alert(1)</script>">',
      '<<script>alert(1);//<</script>',
      '<scr<script>ipt>alert(1)</scr</script>ipt>',
      '<!--<img src="--><img src=x onerror=alert(1)//">',
      '<a href="java&#0000009;script:alert(1)">x</a>',
      '<a href="&#x2000;javascript:alert(1)">x</a>',
      '<a href="javascript&colon;alert(1)">x</a>',
    ];

    it('stores no script element, event-handler attribute or executable URL, whatever the payload', async () => {
      const art = fresh();
      // What a browser would run: the URL as the WHATWG parser reads it, against the page's address.
      const executable = (value: string): boolean => {
        try {
          return ['javascript:', 'vbscript:', 'data:'].includes(
            new URL(value, 'https://site.example/page').protocol,
          );
        } catch {
          return false;
        }
      };
      for (const payload of payloads) {
        const r = await put(art.id, { body: `${art.body}<p>${payload}</p>` });
        expect(r.status, payload).toBe(200);
        const stored = ((await client.get(`/api/v1/articles/${art.id}`, a.api_key)).body as { body: string })
          .body;
        const stack: unknown[] = [parseFragment(stored)];
        while (stack.length > 0) {
          const node = stack.pop() as {
            nodeName: string;
            attrs?: { name: string; value: string }[];
            childNodes?: unknown[];
            content?: unknown;
          };
          expect(
            ['script', 'iframe', 'object', 'embed', 'style', 'base', 'meta', 'link', 'form'],
            payload,
          ).not.toContain(node.nodeName);
          for (const attr of node.attrs ?? []) {
            expect(attr.name.toLowerCase().startsWith('on'), `${payload}: ${attr.name}`).toBe(false);
            expect(attr.name, payload).not.toBe('srcdoc');
            expect(attr.name, payload).not.toBe('style');
            if (['href', 'src', 'cite', 'action', 'background', 'data', 'formaction'].includes(attr.name)) {
              expect(executable(attr.value), `${payload}: ${attr.name}=${attr.value}`).toBe(false);
            }
          }
          stack.push(...(node.childNodes ?? []));
          if (node.content) stack.push(node.content);
        }
      }
    });
  });

  it('every response received above matches the OpenAPI document', async () => {
    const doc = await loadOpenApi(server.url);
    const api = client.recorded.filter((r) => r.path.startsWith('/api/v1/'));
    expect(api.length).toBeGreaterThan(50);
    expect(api.flatMap((r) => validateResponse(doc, r))).toEqual([]);
  });

  describe('daily edit limit, counted across processes through Redis', () => {
    it('with 195 edits used, 50 concurrent edits split over two processes: exactly 5 accepted, the rest 429 until midnight', async () => {
      const limited = await seedAccount(env, 1);
      const site = limited.sites[0]?.id as string;
      const prefix = `cs:test:${Date.now()}:${Math.random().toString(36).slice(2)}`;
      const limits = { ...env, REDIS_URL, RATE_LIMIT_KEY_PREFIX: prefix, RATE_LIMIT_PER_MINUTE: '100000' };
      const one = await startServer(limits);
      const two = await startServer(limits);
      try {
        const c1 = recordingClient(one.url);
        const c2 = recordingClient(two.url);
        const list = (await c1.get(`/api/v1/sites/${site}/articles`, limited.api_key)).body as List<{
          id: string;
        }>;
        const id = list.data[0]?.id as string;
        for (let i = 0; i < 195; i++) {
          const r = await (i % 2 ? c1 : c2).call('PUT', `/api/v1/articles/${id}`, {
            key: limited.api_key,
            body: { title: `Edit ${i}` },
          });
          expect(r.status).toBe(200);
          if (i === 0) {
            expect(r.headers['ratelimit-policy']).toBe('"requests";q=100000;w=60, "edits";q=200;w=86400');
            expect(r.headers.ratelimit).toMatch(/"edits";r=199;t=\d+/);
          }
        }
        const results = await Promise.all(
          Array.from({ length: 50 }, (_, i) =>
            (i % 2 ? c1 : c2).call('PUT', `/api/v1/articles/${id}`, {
              key: limited.api_key,
              body: { title: `Burst ${i}` },
            }),
          ),
        );
        const accepted = results.filter((r) => r.status === 200);
        const refused = results.filter((r) => r.status === 429);
        expect(accepted).toHaveLength(5);
        expect(refused).toHaveLength(45);
        const midnight = Date.UTC(
          new Date().getUTCFullYear(),
          new Date().getUTCMonth(),
          new Date().getUTCDate() + 1,
        );
        for (const r of refused) {
          expect(r.body).toMatchObject({ code: 'edit_limit_reached' });
          const retry = Number(r.headers['retry-after']);
          expect(Math.abs(Date.now() + retry * 1000 - midnight)).toBeLessThan(5_000);
        }
        const article = (await c1.get(`/api/v1/articles/${id}`, limited.api_key)).body as {
          revision: number;
        };
        expect(article.revision).toBe(201);
      } finally {
        await one.stop();
        await two.stop();
      }
    });
  });
});
