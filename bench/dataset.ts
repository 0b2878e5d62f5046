import { isDeepStrictEqual } from 'node:util';
import { sql } from 'kysely';
import pg from 'pg';
import { seededRandom } from '../apps/cli/demo-content.ts';
import { progressBar } from '../apps/cli/progress.ts';
import { openRuntime, type Runtime } from '../apps/runtime.ts';
import { type CreateArticle, decide, initialState } from '../domain/article/decider.ts';
import { articleStream } from '../domain/article/events.ts';
import { backlinkStream } from '../domain/backlink/events.ts';
import type { Actor } from '../domain/event.ts';
import { validateEvent } from '../domain/events.ts';
import { newId } from '../infra/ids.ts';
import { catchUp, inlineProjection, lagOf, rebuild } from '../infra/projection-runner.ts';
import { withoutPassword } from '../infra/url-password.ts';
import { asyncProjectors, projectors } from '../projections/index.ts';
import { appendNew, type BulkAppendDeps, type NewStream } from './bulk-append.ts';
import { benchArticle, demoBacklink, longArticleBody, type Site } from './content.ts';

/** What the benchmark needs in the database. A stored dataset is reused only when its spec is equal. */
export type DatasetSpec = {
  format: 1;
  /** Articles on the list site. */
  articles: number;
  /** Backlinks on the two statistics sites. */
  bigBacklinks: number;
  smallBacklinks: number;
  /** The single long article: its body size (bytes, about) and protected blocks. */
  longBodyBytes: number;
  protectedBlocks: number;
};

export const DEFAULT_SPEC: DatasetSpec = {
  format: 1,
  articles: 100_000,
  bigBacklinks: 1_000_000,
  smallBacklinks: 1_000,
  longBodyBytes: 20 * 1024,
  protectedBlocks: 10,
};

export type Dataset = {
  spec: DatasetSpec;
  accountId: string;
  /** The site with `articles` articles. */
  articleSiteId: string;
  /** The statistics sites; the long article is on the small one. */
  bigBacklinkSiteId: string;
  smallBacklinkSiteId: string;
  longArticleId: string;
  longArticleBytes: number;
  /** UTC day the data was generated; dates run over the 730 days up to it. */
  generatedOn: string;
  /** A full calendar month inside the generated dates (`YYYY-MM`), for `?period=`. */
  month: string;
  /** Seconds per generation phase. */
  timings: Record<string, number>;
};

type Log = (line: string) => void;

const DAY = 86_400_000;
const SPAN_DAYS = 730;
const ARTICLE_CHUNK = 1_000;
const BACKLINK_CHUNK = 5_000;
/** Chunks in flight: one is prepared and projected in JS while PostgreSQL writes the other. */
const IN_FLIGHT = 2;
const pipeline: Actor = { type: 'system', id: 'bench', name: 'Benchmark data' };

/**
 * The benchmark database, migrated and filled: reused when its marker says it holds a complete
 * dataset of the same spec, generated otherwise (through the event store, the bulk path and the
 * projectors, never by writing read-model rows). A database holding events but no marker is not the
 * benchmark's: it is left alone, and this throws.
 */
export async function prepareDataset(
  databaseUrl: string,
  spec: DatasetSpec,
  log: Log,
  /** As the server would open it (`SANITIZE_THREADS`). */
  runtimeOpts: { sanitizeThreads?: number } = {},
): Promise<{ runtime: Runtime; dataset: Dataset; generated: boolean }> {
  if (await createDatabaseIfMissing(databaseUrl)) log(`created database ${withoutPassword(databaseUrl)}`);
  let runtime = await openRuntime(
    { DATABASE_URL: databaseUrl, DATA_DIR: './data' },
    { migrate: true, ...runtimeOpts },
  );
  try {
    const marker = await readMarker(runtime);
    if (marker?.status === 'complete' && isDeepStrictEqual(marker.dataset.spec, spec)) {
      const problem = await verify(runtime, marker.dataset, log);
      if (problem === null) {
        log(`reusing the dataset generated on ${marker.dataset.generatedOn} (marker in bench_dataset)`);
        // The sanitise pool's threads, as a server starts them once it listens: before the load.
        runtime.startThreads();
        return { runtime, dataset: marker.dataset, generated: false };
      }
      log(`the stored dataset does not check out (${problem}); generating it again`);
    } else if (marker) {
      log(
        marker.status === 'complete'
          ? 'the stored dataset has another shape; generating it again'
          : 'a previous generation did not finish; generating again',
      );
    } else {
      const events = await runtime.db
        .selectFrom('events')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .executeTakeFirstOrThrow();
      if (Number(events.n) > 0) {
        throw new Error(
          `${withoutPassword(databaseUrl)} holds events but no benchmark marker: it is not a benchmark database. ` +
            'Point DATABASE_URL at a database of its own (default postgres://postgres@127.0.0.1:5432/cs_bench).',
        );
      }
    }
    if (marker) {
      await runtime.close();
      await recreateDatabase(databaseUrl);
      runtime = await openRuntime(
        { DATABASE_URL: databaseUrl, DATA_DIR: './data' },
        { migrate: true, ...runtimeOpts },
      );
    }
    const dataset = await generate(runtime, spec, log);
    runtime.startThreads();
    return { runtime, dataset, generated: true };
  } catch (error) {
    await runtime.close();
    throw error;
  }
}

async function readMarker(runtime: Runtime): Promise<{ status: string; dataset: Dataset } | undefined> {
  const exists = await sql<{ t: string | null }>`select to_regclass('bench_dataset')::text as t`.execute(
    runtime.db,
  );
  if (exists.rows[0]?.t == null) return undefined;
  const row = await sql<{
    status: string;
    dataset: Dataset;
  }>`select status, dataset from bench_dataset`.execute(runtime.db);
  return row.rows[0];
}

async function writeMarker(
  runtime: Runtime,
  status: 'generating' | 'complete',
  dataset: unknown,
): Promise<void> {
  await sql`create table if not exists bench_dataset (
    id integer primary key default 1 check (id = 1), status text not null, dataset jsonb not null,
    updated_at timestamptz not null default now())`.execute(runtime.db);
  await sql`insert into bench_dataset (status, dataset) values (${status}, ${JSON.stringify(dataset)})
    on conflict (id) do update set status = excluded.status, dataset = excluded.dataset, updated_at = now()`.execute(
    runtime.db,
  );
}

/**
 * Null when the read models hold what the marker promises. On the way, async projections catch up,
 * and a read model added since the data was generated (its tables empty, its events there) is built
 * by replaying the log, as `projections rebuild` would.
 */
async function verify(runtime: Runtime, dataset: Dataset, log: Log): Promise<string | null> {
  for (const p of projectors) {
    if (p.tables.length === 0) continue;
    let empty = true;
    for (const table of p.tables) {
      const rows = await sql<{
        any: boolean;
      }>`select exists (select 1 from ${sql.table(table)}) as any`.execute(runtime.db);
      if (rows.rows[0]?.any) empty = false;
    }
    if (!empty) continue;
    const events = await runtime.db
      .selectFrom('events')
      .select('position')
      .where('type', 'in', p.handles)
      .limit(1)
      .execute();
    if (events.length === 0) continue;
    const bar = progressBar(`rebuild ${p.name} (new since the data was generated)`, 0);
    try {
      await rebuild(runtime.db, p, ({ done, total }) => bar.update(done, total));
    } finally {
      bar.stop();
    }
  }
  for (const p of asyncProjectors) {
    if ((await lagOf(runtime.db, p)) > 0) {
      log(`catching up ${p.name}`);
      await catchUp(runtime.db, p, undefined, { batchSize: BACKLINK_CHUNK, timeoutMs: 120_000 });
    }
  }
  const articles = await sql<{
    n: string;
  }>`select count(*) as n from articles where site_id = ${dataset.articleSiteId}`.execute(runtime.db);
  if (Number(articles.rows[0]?.n) !== dataset.spec.articles) return 'article count';
  for (const [siteId, expected] of [
    [dataset.bigBacklinkSiteId, dataset.spec.bigBacklinks],
    [dataset.smallBacklinkSiteId, dataset.spec.smallBacklinks],
  ] as const) {
    const backlinks = await sql<{
      n: string;
    }>`select count(*) as n from backlinks where site_id = ${siteId}`.execute(runtime.db);
    if (Number(backlinks.rows[0]?.n) !== expected) return `backlink count of ${siteId}`;
    const buckets = await sql<{
      n: string;
    }>`select coalesce(sum(backlinks_industry + backlinks_local), 0) as n
      from stats_buckets where site_id = ${siteId} and grain = 'month'`.execute(runtime.db);
    if (Number(buckets.rows[0]?.n) !== expected) return `statistics of ${siteId}`;
  }
  const long = await sql<{
    n: string;
  }>`select count(*) as n from article_bodies where article_id = ${dataset.longArticleId}`.execute(
    runtime.db,
  );
  if (Number(long.rows[0]?.n) !== 1) return 'the long article';
  return null;
}

async function generate(runtime: Runtime, spec: DatasetSpec, log: Log): Promise<Dataset> {
  const { commands, db, handle } = runtime;
  const rnd = seededRandom(20261121);
  const now = new Date();
  const generatedOn = now.toISOString().slice(0, 10);
  const timings: Record<string, number> = {};
  const timed = async <T>(phase: string, work: () => Promise<T>): Promise<T> => {
    const started = performance.now();
    const result = await work();
    timings[phase] = Math.round((performance.now() - started) / 100) / 10;
    log(`${phase}: ${timings[phase]} s`);
    return result;
  };
  // The same dependencies the runtime gives its event store (apps/runtime.ts).
  const deps: BulkAppendDeps = { db, handle, validate: validateEvent, inline: inlineProjection(projectors) };
  await writeMarker(runtime, 'generating', { spec });

  const { accountId } = await commands.openAccount({
    name: 'Benchmark account',
    email: `bench-${now.getTime()}@example.com`,
  });
  const sites: Record<'articles' | 'big' | 'small', Site & { id: string }> = {
    articles: { name: 'Northside Plumbing', domain: 'northside-plumbing.example', topic: 'plumbing', id: '' },
    big: { name: 'Harbour Dental', domain: 'harbour-dental.example', topic: 'dental care', id: '' },
    small: {
      name: 'Greenleaf Landscaping',
      domain: 'greenleaf-gardens.example',
      topic: 'garden design',
      id: '',
    },
  };
  for (const site of Object.values(sites)) {
    site.id = (
      await commands.addSite(accountId, {
        name: site.name,
        domain: site.domain,
        url: `https://${site.domain}/`,
      })
    ).siteId;
  }
  const daysAgo = (): Date => new Date(now.getTime() - Math.floor(rnd() * SPAN_DAYS) * DAY);

  // 100,000 articles: decided by the article decider (sanitised, checked) and appended in bulk.
  await timed(`${spec.articles} articles`, () =>
    inChunks(`articles`, spec.articles, ARTICLE_CHUNK, (from, to) => {
      const streams: NewStream[] = [];
      for (let n = from; n < to; n++) {
        const article = benchArticle(rnd, sites.articles, n);
        const roll = rnd();
        const status =
          roll < 0.08 ? 'draft' : roll < 0.12 ? 'scheduled' : roll < 0.15 ? 'archived' : 'published';
        const publishedAt =
          status === 'draft'
            ? null
            : status === 'scheduled'
              ? new Date(now.getTime() + Math.ceil(rnd() * 30) * DAY).toISOString()
              : new Date(daysAgo().getTime() - Math.floor(rnd() * DAY)).toISOString();
        const articleId = newId('art');
        const command: CreateArticle = {
          type: 'CreateArticle',
          data: {
            articleId,
            siteId: sites.articles.id,
            accountId,
            title: article.title,
            body: article.body,
            url: article.url,
            status,
            publishedAt,
            targetKeyword: article.targetKeyword,
            featuredImage:
              rnd() < 0.7
                ? {
                    url: `https://images.${sites.articles.domain}/articles/${n + 1}.jpg`,
                    alt: article.title,
                    width: 1200,
                    height: 630,
                  }
                : null,
            origin: 'rewrite',
            actor: pipeline,
            reason: null,
          },
          metadata: { at: now.toISOString() },
        };
        streams.push({ streamId: articleStream(articleId), events: decide(command, initialState) });
      }
      return appendNew(deps, streams);
    }),
  );

  // The long article, through the ordinary command handler.
  const longBody = longArticleBody(
    rnd,
    sites.small,
    spec.longBodyBytes - spec.protectedBlocks * 130,
    spec.protectedBlocks,
  );
  const { articleId: longArticleId } = await commands.createArticle(
    accountId,
    {
      siteId: sites.small.id,
      title: 'The complete guide to garden design',
      body: longBody,
      url: `https://${sites.small.domain}/blog/complete-guide`,
      status: 'published',
      publishedAt: now.toISOString(),
      targetKeyword: 'garden design',
      featuredImage: null,
    },
    { origin: 'rewrite', actor: pipeline },
  );
  const stored = await sql<{
    n: number;
  }>`select octet_length(body) as n from article_bodies where article_id = ${longArticleId}`.execute(db);
  const longArticleBytes = Number(stored.rows[0]?.n);

  for (const [key, count] of [
    ['small', spec.smallBacklinks],
    ['big', spec.bigBacklinks],
  ] as const) {
    const site = sites[key];
    await timed(`${count} backlinks`, () =>
      inChunks(`backlinks (${count})`, count, BACKLINK_CHUNK, (from, to) => {
        const streams: NewStream[] = [];
        for (let n = from; n < to; n++) {
          const backlinkId = newId('bl');
          streams.push({
            streamId: backlinkStream(backlinkId),
            events: [
              {
                type: 'BacklinkAcquired',
                data: {
                  backlinkId,
                  siteId: site.id,
                  accountId,
                  acquiredOn: daysAgo().toISOString().slice(0, 10),
                  ...demoBacklink(rnd, site),
                },
                metadata: { at: now.toISOString() },
              },
            ],
          });
        }
        return appendNew(deps, streams);
      }),
    );
  }

  // The async read models (backlinks, statistics, activity) catch up from the log.
  for (const p of asyncProjectors) {
    await timed(`project ${p.name}`, async () => {
      const bar = progressBar(`project ${p.name}`, 0);
      try {
        await catchUp(db, p, ({ done, total }) => bar.update(done, total), {
          batchSize: BACKLINK_CHUNK,
          timeoutMs: 120_000,
        });
      } finally {
        bar.stop();
      }
    });
  }
  // Fresh statistics and visibility maps, as autovacuum leaves a table that has settled.
  await timed('vacuum analyze', () => sql`vacuum analyze`.execute(db));

  const lastMonth = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1, 1));
  const dataset: Dataset = {
    spec,
    accountId,
    articleSiteId: sites.articles.id,
    bigBacklinkSiteId: sites.big.id,
    smallBacklinkSiteId: sites.small.id,
    longArticleId,
    longArticleBytes,
    generatedOn,
    month: lastMonth.toISOString().slice(0, 7),
    timings,
  };
  await writeMarker(runtime, 'complete', dataset);
  return dataset;
}

/** Runs `work(from, to)` over [0, total) in chunks, IN_FLIGHT at a time, with a progress bar. */
async function inChunks(
  label: string,
  total: number,
  size: number,
  work: (from: number, to: number) => Promise<unknown>,
): Promise<void> {
  const bar = progressBar(label, total);
  let next = 0;
  let done = 0;
  const worker = async (): Promise<void> => {
    while (next < total) {
      const from = next;
      const to = Math.min(total, from + size);
      next = to;
      await work(from, to);
      done += to - from;
      bar.update(done);
    }
  };
  try {
    await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  } finally {
    bar.stop();
  }
}

/** The same server's maintenance database, for CREATE and DROP DATABASE. */
function adminUrl(databaseUrl: string): { admin: string; name: string } {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.replace(/^\//, ''));
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new Error(`unsupported database name: ${name}`);
  url.pathname = '/postgres';
  return { admin: url.toString(), name };
}

async function withAdmin<T>(
  databaseUrl: string,
  work: (client: pg.Client, name: string) => Promise<T>,
): Promise<T> {
  const { admin, name } = adminUrl(databaseUrl);
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  try {
    return await work(client, name);
  } finally {
    await client.end();
  }
}

async function createDatabaseIfMissing(databaseUrl: string): Promise<boolean> {
  return withAdmin(databaseUrl, async (client, name) => {
    const found = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (found.rowCount) return false;
    await client.query(`create database ${name}`);
    return true;
  });
}

export async function recreateDatabase(databaseUrl: string): Promise<void> {
  await withAdmin(databaseUrl, async (client, name) => {
    await client.query(`drop database if exists ${name} with (force)`);
    await client.query(`create database ${name}`);
  });
}
