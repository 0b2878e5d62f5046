import {
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  sql,
} from 'kysely';
import { evolve, initialState } from '../domain/article/decider.ts';
import { type ArticleCreated, type ArticleEdited, articleStream } from '../domain/article/events.ts';
import type { Database } from '../infra/db/schema.ts';
import { ALWAYS_NAMED, createStatementNames } from '../infra/db/statement-cache.ts';
import { createHtmlMemory } from '../infra/html-memory.ts';
import type { Pending } from '../infra/projection.ts';
import { inStatement } from '../infra/projection.ts';
import { inlineProjection } from '../infra/projection-runner.ts';
import { createSnapshotMemory } from '../projections/article-snapshots.ts';
import { createProjectors } from '../projections/index.ts';
import { median } from './report.ts';

/*
 * Two parts of an edit's append on the server's thread, alone, in one process (no database):
 *
 * - the inline projections' statements of a title edit (the article row, the snapshot, the revision;
 *   the activity projector has none), made by the store's `inline` (`inlineProjection`) and compiled by kysely, as
 *   the append's statement carries them;
 * - the statement name of a group append's text (ALWAYS_NAMED, about 11 KB) looked up, the text
 *   built afresh for each lookup as the store builds it.
 *
 * CALLS of each, ROUNDS times; CPU per call of this process, medians. To compare two checkouts, run
 * it in each, in turns.
 *
 *   node bench/edit-statements.ts
 */
const CALLS = 30_000;
const ROUNDS = 7;

// Compiles statements; never connects (kysely's compile-only set-up).
const db = new Kysely<Database>({
  dialect: {
    createAdapter: () => new PostgresAdapter(),
    createDriver: () => new DummyDriver(),
    createIntrospector: (kysely) => new PostgresIntrospector(kysely),
    createQueryCompiler: () => new PostgresQueryCompiler(),
  },
});

const snapshots = createSnapshotMemory(16);
const project = inlineProjection(createProjectors({ snapshots, html: createHtmlMemory() }));
const articleId = 'art_01kbench0000000000000000aa';
const actor = { type: 'api_key', id: 'key_bench', name: 'Benchmark key' } as const;
const metadata = { at: '2026-11-28T01:00:00.000Z', requestId: 'req_bench' };
const created: ArticleCreated = {
  type: 'ArticleCreated',
  data: {
    articleId,
    revision: 1,
    origin: 'api',
    actor,
    reason: null,
    siteId: 'site_bench',
    accountId: 'acc_bench',
    title: 'An article',
    body: `<p>${'Words of the article. '.repeat(1000)}</p>`,
    url: 'https://example.com/an-article',
    status: 'published',
    publishedAt: '2026-11-01T09:00:00Z',
    targetKeyword: null,
    featuredImage: null,
  },
  metadata,
};
// The snapshot the command read: what lets the snapshot projector write within the statement.
snapshots.remember(articleId, { version: 1, state: evolve(initialState, created) });
const appended = sql<boolean>`exists (select from appended_1)`;

function titleEdit(i: number): Pending<ArticleEdited> {
  return {
    type: 'ArticleEdited',
    data: { articleId, revision: 2, origin: 'api', actor, reason: null, title: `Title ${i}`, sanitized: [] },
    metadata,
    eventId: `0190a000-0000-7000-8000-${String(i % 1e12).padStart(12, '0')}`,
    streamId: articleStream(articleId),
    version: 2,
  };
}

/** CPU per call of `work`, in µs: the median of ROUNDS rounds of CALLS calls. */
function measure(work: (i: number) => number): number {
  const rounds: number[] = [];
  let sink = 0;
  for (let round = 0; round <= ROUNDS; round++) {
    const start = process.cpuUsage();
    for (let i = 0; i < CALLS; i++) sink += work(i);
    const used = process.cpuUsage(start);
    // The first round warms up.
    if (round > 0) rounds.push((used.user + used.system) / CALLS);
  }
  if (sink < 0) throw new Error('unreachable');
  return median(rounds);
}

const statements = measure((i) => {
  const made = inStatement(project([titleEdit(i)], { appended: () => appended }));
  if (made === 'in transaction') throw new Error('a title edit was not made within the statement');
  const parts = made.map((statement, k) => sql`${sql.raw(`inline_${k}`)} as (${statement})`);
  const compiled = sql`with ${sql.join(parts)} select`.compile(db);
  return compiled.sql.length + compiled.parameters.length;
});

const names = createStatementNames();
const member = (n: number): string =>
  `claim_${n} as (update streams set version = version + $${3 * n}::integer where stream_id = $${3 * n + 1} and version = $${3 * n + 2}::integer returning version)`;
const groupText = (): string =>
  `${ALWAYS_NAMED} with ${Array.from({ length: 80 }, (_, n) => member(n)).join(', ')} select 1`;
names.nameOf(groupText());
names.nameOf(groupText());
const lookup = measure(() => (names.nameOf(groupText()) === undefined ? 0 : 1));
const build = measure(() => groupText().length);

process.stdout.write(
  `an edit's inline statements made and compiled: ${statements.toFixed(2)} µs per title edit\n` +
    `a group append's statement name (${groupText().length} characters): ${Math.max(0, lookup - build).toFixed(2)} µs per lookup (the text's building, ${build.toFixed(2)} µs, not counted)\n` +
    `(${ROUNDS} rounds of ${CALLS}, medians; ${new Date().toISOString()})\n`,
);
