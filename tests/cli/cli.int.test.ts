import { mkdir, mkdtemp, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { verify as argon2Verify } from '@node-rs/argon2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { openDatabase } from '../../infra/db/open.ts';
import { hashApiKey } from '../../infra/ids.ts';
import { findAccountByEmail, findApiKeyByHash } from '../../projections/accounts.ts';
import { listActivity } from '../../projections/activity.ts';
import { listArticles } from '../../projections/articles.ts';
import { listBacklinks } from '../../projections/backlinks.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { cli, run } from '../support/process.ts';
import { catchUpAll } from '../support/runtime.ts';

/** CONTRACT "CLI": `seed-demo --json` prints exactly this object on stdout and nothing else. */
const SeedOutput = z.strictObject({
  account_id: z.string().min(1),
  email: z.email(),
  password: z.string().min(12),
  api_key: z.string().regex(/^cs_live_/),
  sites: z.array(z.strictObject({ id: z.string().min(1), domain: z.string().min(1) })),
});

/** Tests that start a CLI process many times (each a second or two), or make a new embedded database. */
const HEAVY = 120_000;

describe('CLI against PostgreSQL', () => {
  let test: TestDatabase;
  let env: Record<string, string>;
  let dir: string;
  beforeAll(async () => {
    test = await createTestDatabase('postgres');
    env = { DATABASE_URL: test.databaseUrl as string };
    dir = await mkdtemp(join(tmpdir(), 'cs-cli-'));
  });
  afterAll(async () => {
    await test.drop();
    await rm(dir, { recursive: true, force: true });
  });

  it('`npm run -s cli -- seed-demo --json` prints the CONTRACT object and nothing else on stdout', async () => {
    const r = await run(
      'npm',
      [
        'run',
        '-s',
        'cli',
        '--',
        'seed-demo',
        '--json',
        '--sites',
        '2',
        '--articles',
        '4',
        '--backlinks',
        '6',
      ],
      env,
    );
    expect(r.code, r.stderr).toBe(0);
    const out = SeedOutput.parse(JSON.parse(r.stdout));
    expect(out.sites).toHaveLength(2);
    const db = test.handle.db;
    const key = await findApiKeyByHash(db, hashApiKey(out.api_key));
    expect(key).toMatchObject({ account_id: out.account_id, scope: 'write', revoked_at: null });
    const site = out.sites[0]?.id as string;
    const scope = { accountId: out.account_id, siteId: site };
    const articles = await listArticles(db, scope, { page: 1, perPage: 100 });
    expect(articles?.total).toBe(4);
    const backlinks = await listBacklinks(db, scope, { page: 1, perPage: 100 });
    expect(backlinks?.total).toBe(6);
    const body = await db
      .selectFrom('article_bodies')
      .select('body')
      .where('article_id', '=', articles?.rows[0]?.id as string)
      .executeTakeFirstOrThrow();
    expect(body.body).toMatch(/data-service-protected="backlink"/);
    expect(body.body).toMatch(/data-service-protected="internal"/);
  });

  it('creates an account and keys, lists them without the secret, revokes one', async () => {
    const account = await cli(['accounts', 'create', '--name', 'Acme', '--email', 'owner@acme.example'], env);
    expect(account.code, account.stderr).toBe(0);
    const { account_id } = JSON.parse(account.stdout) as { account_id: string };
    const created = await cli(
      ['keys', 'create', '--account', account_id, '--name', 'Reports', '--scope', 'read'],
      env,
    );
    expect(created.code, created.stderr).toBe(0);
    const key = JSON.parse(created.stdout) as { key_id: string; api_key: string; scope: string };
    expect(key.scope).toBe('read');
    const listed = await cli(['keys', 'list', '--account', account_id], env);
    expect(listed.stdout).toContain(key.key_id);
    expect(listed.stdout).not.toContain(key.api_key);
    const stored = await test.handle.db
      .selectFrom('api_keys')
      .selectAll()
      .where('id', '=', key.key_id)
      .executeTakeFirstOrThrow();
    expect(stored.hash).toBe(hashApiKey(key.api_key));
    const revoked = await cli(['keys', 'revoke', '--account', account_id, '--key', key.key_id], env);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect((await findApiKeyByHash(test.handle.db, hashApiKey(key.api_key)))?.revoked_at).toBeInstanceOf(
      Date,
    );
    const bad = await cli(['keys', 'create', '--account', account_id, '--scope', 'admin'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--scope must be read or write');
    const missing = await cli(['keys', 'revoke', '--account', account_id, '--key', 'key_nope'], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('not_found');
    // Each change is in the account's activity log, as the operator's (a refused one changed nothing).
    const log = await listActivity(test.handle.db, account_id, { page: 1, perPage: 20, source: 'system' });
    expect(log.rows.map((r) => [r.operation, r.actor.name, r.status]).reverse()).toEqual([
      ['open_account', 'Operator (CLI)', 200],
      ['create_api_key', 'Operator (CLI)', 200],
      ['revoke_api_key', 'Operator (CLI)', 200],
    ]);
  });

  it('sets a password from stdin or generated, for accounts and staff; no secret reaches the log', async () => {
    const db = test.handle.db;
    const created = await cli(
      ['accounts', 'create', '--name', 'Pw', '--email', 'pw@pw.example', '--password', 'first password here'],
      env,
    );
    expect(created.code, created.stderr).toBe(0);
    const { account_id } = JSON.parse(created.stdout) as { account_id: string };
    const piped = await cli(
      ['accounts', 'set-password', '--email', 'PW@pw.example', '--password-stdin'],
      env,
      'second password here\n',
    );
    expect(piped.code, piped.stderr).toBe(0);
    expect(JSON.parse(piped.stdout)).toEqual({ account_id, email: 'pw@pw.example' });
    const hash = async (): Promise<string> =>
      (await findAccountByEmail(db, 'pw@pw.example'))?.password_hash ?? '';
    expect(await argon2Verify(await hash(), 'second password here')).toBe(true);
    expect(await argon2Verify(await hash(), 'first password here')).toBe(false);

    const generated = await cli(['accounts', 'set-password', '--email', 'pw@pw.example'], env);
    expect(generated.code, generated.stderr).toBe(0);
    const { password } = JSON.parse(generated.stdout) as { password: string };
    expect(password.length).toBeGreaterThanOrEqual(12);
    expect(await argon2Verify(await hash(), password)).toBe(true);

    const short = await cli(
      ['accounts', 'set-password', '--email', 'pw@pw.example', '--password-stdin'],
      env,
      'short\n',
    );
    expect(short.code).toBe(2);
    expect(short.stderr).toContain('at least 12 characters');
    const shortCreate = await cli(
      ['accounts', 'create', '--name', 'Short', '--email', 'short@pw.example', '--password', 'short'],
      env,
    );
    expect(shortCreate.code).toBe(2);
    expect(shortCreate.stderr).toContain('the password must be at least 12 characters long');
    expect(await findAccountByEmail(db, 'short@pw.example')).toBeUndefined();
    const unknown = await cli(['accounts', 'set-password', '--email', 'nobody@pw.example'], env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('not_found');

    const staff = await cli(['staff', 'create', '--name', 'Sam', '--email', 'sam@pw.example'], env);
    expect(staff.code, staff.stderr).toBe(0);
    const { staff_id } = JSON.parse(staff.stdout) as { staff_id: string };
    const staffSet = await cli(
      ['staff', 'set-password', '--email', 'sam@pw.example', '--password-stdin'],
      env,
      'staff password here',
    );
    expect(staffSet.code, staffSet.stderr).toBe(0);
    const staffHash = await db
      .selectFrom('credentials')
      .select('secret')
      .where('holder_id', '=', staff_id)
      .where('kind', '=', 'password')
      .executeTakeFirstOrThrow();
    expect(await argon2Verify(staffHash.secret, 'staff password here')).toBe(true);

    const events = await db
      .selectFrom('events')
      .select(['type', 'data'])
      .where('stream_id', 'in', [`account-${account_id}`, `staff-${staff_id}`])
      .orderBy('position')
      .execute();
    expect(events.map((e) => e.type)).toEqual([
      'AccountOpened',
      'PasswordSet',
      'PasswordChanged',
      'PasswordChanged',
      'StaffMemberAdded',
      'PasswordSet',
      'PasswordChanged',
    ]);
    const text = JSON.stringify(events);
    expect(text).not.toContain('$argon2');
    expect(text).not.toContain(staffHash.secret);
    expect(text).not.toContain(await hash());
  });

  it('keeps API keys working through `projections rebuild`', async () => {
    const account = await cli(['accounts', 'create', '--name', 'Rb', '--email', 'rb@rb.example'], env);
    const { account_id } = JSON.parse(account.stdout) as { account_id: string };
    const created = await cli(['keys', 'create', '--account', account_id, '--name', 'K'], env);
    const { api_key } = JSON.parse(created.stdout) as { api_key: string };
    const rebuilt = await cli(['projections', 'rebuild', 'accounts'], env);
    expect(rebuilt.code, rebuilt.stderr).toBe(0);
    expect(await findApiKeyByHash(test.handle.db, hashApiKey(api_key))).toMatchObject({ account_id });
  });

  it('ingests lines from standard input with --file - (read once, counted as they come)', async () => {
    const { account_id } = JSON.parse(
      (await cli(['accounts', 'create', '--name', 'Pipe', '--email', 'pipe@pipe.example'], env)).stdout,
    ) as { account_id: string };
    const lines = [1, 2, 3].map((n) =>
      JSON.stringify({
        id: `site_pipe_${n}`,
        name: `Pipe ${n}`,
        domain: `pipe${n}.example`,
        url: `https://pipe${n}.example/`,
      }),
    );
    const r = await cli(
      ['ingest', 'sites', '--file', '-', '--account', account_id],
      env,
      `${lines.join('\n')}\n`,
    );
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ applied: 3, failed: [] });
    expect(r.stderr).toContain('ingest sites: 3/3 in');
  });

  it(
    'ingests JSONL: good lines apply, a bad line is reported by number and applies nothing',
    async () => {
      const account = JSON.parse(
        (await cli(['accounts', 'create', '--name', 'Feed', '--email', 'feed@feed.example'], env)).stdout,
      ) as {
        account_id: string;
      };
      const a = account.account_id;
      const sites = join(dir, 'sites.jsonl');
      await writeFile(
        sites,
        [
          JSON.stringify({
            id: 'site_feed_1',
            name: 'Feed One',
            domain: 'one.example',
            url: 'https://one.example/',
          }),
          '{"id": "site_feed_2", "name": "broken"',
          JSON.stringify({ id: 'site_feed_3', name: 'No URL', domain: 'three.example' }),
          '',
          JSON.stringify({
            id: 'site_feed_4',
            name: 'Feed Four',
            domain: 'four.example',
            url: 'https://four.example/',
          }),
          JSON.stringify({
            id: 'site feed/5',
            name: 'Bad id',
            domain: 'five.example',
            url: 'https://five.example/',
          }),
        ].join('\n'),
      );
      const r = await cli(['ingest', 'sites', '--file', sites, '--account', a], env);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`${sites}:2: not valid JSON`);
      expect(r.stderr).toMatch(new RegExp(`${sites}:3: url: `));
      expect(r.stderr).toMatch(new RegExp(`${sites}:6: id: must be an id`));
      expect(JSON.parse(r.stdout)).toMatchObject({
        applied: 2,
        failed: [{ line: 2 }, { line: 3 }, { line: 6 }],
      });
      const ids = (
        await test.handle.db.selectFrom('sites').select('id').where('account_id', '=', a).execute()
      )
        .map((s) => s.id)
        .sort();
      expect(ids).toEqual(['site_feed_1', 'site_feed_4']);

      const articles = join(dir, 'articles.jsonl');
      const body =
        '<p>Hello <a href="https://partner.example/" data-service-protected="backlink" data-service-id="bl_1">partner</a></p>';
      await writeFile(
        articles,
        [
          JSON.stringify({
            id: 'art_feed_1',
            site_id: 'site_feed_1',
            title: 'One',
            body,
            url: 'https://one.example/1',
            status: 'published',
            published_at: '2026-11-01T10:00:00Z',
          }),
          JSON.stringify({
            id: 'art_feed_2',
            site_id: 'site_feed_1',
            title: 'Two',
            body,
            url: 'https://one.example/2',
            status: 'published',
          }),
          JSON.stringify({
            id: 'art_feed_3',
            site_id: 'site_other',
            title: 'Three',
            body,
            url: 'https://one.example/3',
            status: 'draft',
          }),
        ].join('\n'),
      );
      const ra = await cli(['ingest', 'articles', '--file', articles, '--account', a], env);
      expect(ra.stderr).toContain(':2: invalid_request: A published article needs published_at');
      expect(ra.stderr).toContain(':3: not_found');
      expect(JSON.parse(ra.stdout)).toMatchObject({ applied: 1 });

      const rewrites = join(dir, 'rewrites.jsonl');
      await writeFile(
        rewrites,
        [
          JSON.stringify({ article_id: 'art_feed_1', title: 'One, rewritten', reason: 'freshness' }),
          JSON.stringify({ article_id: 'art_feed_1', body: '<p>All links gone</p>' }),
          JSON.stringify({ article_id: 'art_feed_1', status: 'archived' }),
        ].join('\n'),
      );
      const rr = await cli(['ingest', 'rewrites', '--file', rewrites, '--account', a], env);
      expect(rr.stderr).toContain(':2: protected_links_modified');
      expect(JSON.parse(rr.stdout)).toMatchObject({ applied: 2 });
      const revisions = await test.handle.db
        .selectFrom('revisions')
        .selectAll()
        .where('article_id', '=', 'art_feed_1')
        .orderBy('revision')
        .execute();
      expect(revisions.map((r) => [r.revision, r.origin, r.title])).toEqual([
        [1, 'rewrite', 'One'],
        [2, 'rewrite', 'One, rewritten'],
        [3, 'rewrite', 'One, rewritten'],
      ]);
      expect(revisions[1]?.reason).toBe('freshness');

      const backlinks = join(dir, 'backlinks.jsonl');
      const line = {
        id: 'bl_feed_1',
        site_id: 'site_feed_1',
        acquired_on: '2026-11-03',
        source_domain: 'news.example',
        source_url: 'https://news.example/a',
        target_url: 'https://one.example/',
        anchor_text: 'one',
        anchor_type: 'branded',
        category: 'local',
      };
      await writeFile(
        backlinks,
        [
          JSON.stringify(line),
          JSON.stringify(line),
          JSON.stringify({ ...line, id: 'bl_feed_2', category: 'national' }),
        ].join('\n'),
      );
      const rb = await cli(['ingest', 'backlinks', '--file', backlinks, '--account', a], env);
      expect(rb.stderr).toContain(':2: conflict');
      expect(rb.stderr).toContain(':3: category:');
      expect(
        (
          await listBacklinks(
            test.handle.db,
            { accountId: a, siteId: 'site_feed_1' },
            { page: 1, perPage: 10 },
          )
        )?.total,
      ).toBe(1);

      const nofile = await cli(['ingest', 'sites', '--file', join(dir, 'missing.jsonl')], env);
      expect(nofile.code).toBe(1);
      expect(nofile.stderr).toContain('ENOENT');
    },
    HEAVY,
  );

  it('reports projection status and rebuilds with the same rows', async () => {
    // The async projectors are caught up first: a transaction open elsewhere on the server (another
    // test file's) can hold the last events back from the CLI's own catch-up for a while.
    await catchUpAll(test.handle.db);
    const status = await cli(['projections', 'status'], env);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/backlinks@1\s+async\s+lag\s+0/);
    expect(status.stdout).toMatch(/articles@1\s+inline/);
    const before = await test.handle.db.selectFrom('backlinks').selectAll().orderBy('id').execute();
    const rebuilt = await cli(['projections', 'rebuild', 'backlinks'], env);
    expect(rebuilt.code, rebuilt.stderr).toBe(0);
    expect(rebuilt.stderr).toMatch(/backlinks@1: replayed \d+ events/);
    expect(await test.handle.db.selectFrom('backlinks').selectAll().orderBy('id').execute()).toEqual(before);
    const unknown = await cli(['projections', 'rebuild', 'nope'], env);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('unknown projection nope');
  });

  it('`media gc` removes unreferenced images older than the grace period (`--dry-run` only reports)', async () => {
    const mediaDir = join(dir, 'media-gc');
    const key = `${'ab'.repeat(32)}.png`;
    const file = join(mediaDir, 'ab', key);
    await mkdir(join(mediaDir, 'ab'), { recursive: true });
    await writeFile(file, 'not referenced by any article');
    const twoHoursAgo = new Date(Date.now() - 2 * 3_600_000);
    await utimes(file, twoHoursAgo, twoHoursAgo);
    const withMedia = { ...env, MEDIA_DIR: mediaDir };

    const young = await cli(['media', 'gc'], withMedia);
    expect(young.code, young.stderr).toBe(0);
    expect(JSON.parse(young.stdout)).toMatchObject({ scanned: 1, young: 1, removed: 0 });
    const dry = await cli(['media', 'gc', '--dry-run', '--grace-hours', '1'], withMedia);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stderr).toContain('1 unreferenced would be removed');
    expect(await readFile(file, 'utf8')).toBe('not referenced by any article');
    const gc = await cli(['media', 'gc', '--grace-hours', '1'], withMedia);
    expect(gc.code, gc.stderr).toBe(0);
    expect(JSON.parse(gc.stdout)).toMatchObject({ scanned: 1, removed: 1, dry_run: false });
    await expect(readFile(file)).rejects.toThrow(/ENOENT/);
    expect((await cli(['media', 'gc', '--grace-hours', 'soon'], withMedia)).code).toBe(2);
  });

  it('`idempotency purge` deletes the records older than 24 hours', async () => {
    const db = test.handle.db;
    const account = (await db.selectFrom('accounts').select('id').executeTakeFirstOrThrow()).id;
    const row = (key: string, hoursAgo: number) => ({
      account_id: account,
      key,
      request_hash: 'x',
      status: 200,
      headers: JSON.stringify({}),
      body: JSON.stringify({}),
      created_at: new Date(Date.now() - hoursAgo * 3_600_000),
    });
    await db
      .insertInto('idempotency_keys')
      .values([row('cli-old', 30), row('cli-young', 1)])
      .execute();
    const r = await cli(['idempotency', 'purge'], env);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ purged: 1 });
    const left = await db
      .selectFrom('idempotency_keys')
      .select('key')
      .where('key', 'like', 'cli-%')
      .execute();
    expect(left.map((x) => x.key)).toEqual(['cli-young']);
  });

  it('refuses an unknown command or option with usage, and a bad environment in one line', async () => {
    const r = await cli(['frobnicate'], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('unknown command frobnicate');
    const o = await cli(['seed-demo', '--sites', 'many'], env);
    expect(o.code).toBe(2);
    expect(o.stderr).toContain('--sites must be a whole number');
    const e = await cli(['migrate'], { DATABASE_URL: 'mysql://nope' });
    expect(e.code).toBe(2);
    expect(e.stderr.trim()).toMatch(
      /^Invalid configuration: DATABASE_URL="mysql:\/\/nope": expected a postgres/,
    );
  });
});

describe('CLI on the embedded database', () => {
  it(
    'migrates and seeds a demo account in DATA_DIR, which survives to the next command',
    async () => {
      const dataDir = await mkdtemp(join(tmpdir(), 'cs-embedded-'));
      try {
        const env = { DATA_DIR: dataDir };
        expect((await cli(['migrate'], env)).code).toBe(0);
        const seeded = await cli(
          ['seed-demo', '--json', '--sites', '1', '--articles', '2', '--backlinks', '3'],
          env,
        );
        expect(seeded.code, seeded.stderr).toBe(0);
        const out = SeedOutput.parse(JSON.parse(seeded.stdout));
        const listed = await cli(['keys', 'list', '--account', out.account_id], env);
        expect(listed.code, listed.stderr).toBe(0);
        expect(listed.stdout).toContain('"scope":"write"');
        const handle = await openDatabase({ dataDir });
        try {
          expect(
            (
              await listBacklinks(
                handle.db,
                { accountId: out.account_id, siteId: out.sites[0]?.id as string },
                { page: 1, perPage: 10 },
              )
            )?.total,
          ).toBe(3);
        } finally {
          await handle.close();
        }
      } finally {
        await rm(dataDir, { recursive: true, force: true });
      }
    },
    HEAVY,
  );
});
