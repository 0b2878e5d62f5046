import { type Expression, type RawBuilder, type Selectable, type SqlBool, sql } from 'kysely';
import { type Article, evolve, initialState } from '../domain/article/decider.ts';
import {
  type ArticleEdited,
  type ArticleEvent,
  type ArticleRestored,
  articleEventTypes,
  type FeaturedImageReplaced,
} from '../domain/article/events.ts';
import {
  MARK_END,
  MARK_START,
  SEARCH_LANGUAGE_DEFAULT,
  SEARCH_RANKED_MAX,
  SNIPPET_SEARCHED_FIRST,
} from '../domain/article/search.ts';
import { extractProtectedLinks, wordCount } from '../domain/html/facts.ts';
import type { HtmlMemory } from '../domain/html/memory.ts';
import type { ArticleBodiesTable, ArticlesTable } from '../infra/db/read-model-tables.ts';
import type { Db } from '../infra/db/schema.ts';
import { NEVER_NAMED, prepared } from '../infra/db/statement-cache.ts';
import {
  ALWAYS,
  IN_TRANSACTION,
  type Pending,
  ROW_STREAM,
  runsOf,
  runTogether,
  type Statement,
  type Trx,
} from '../infra/projection.ts';
import { invalidKeyError, isKeyLive, keyLive } from './accounts.ts';
import { inlineProjector, offsetOf, type Page, type PageQuery, unhandled } from './projector.ts';
import { inScope, type SiteScope, siteOwner, startsWithPattern } from './sites.ts';

/**
 * The article list row and its body (two tables, so list pages never read bodies). Inline: an edit is
 * visible to the next read. Each row carries its revision; an event applies only on top of the one
 * before it, which makes replays idempotent. With the runtime's html memory, the word count and
 * protected links of a body the decider just sanitised are read from it rather than parsed again.
 */
export function createArticlesProjector(
  memory?: HtmlMemory,
  /** The text search configuration of the search vectors (SEARCH_LANGUAGE). */
  language: string = SEARCH_LANGUAGE_DEFAULT,
) {
  return inlineProjector({
    name: 'articles@1',
    mode: 'inline',
    handles: articleEventTypes,
    tables: ['articles', 'article_bodies', 'article_title_search', 'article_counts'],
    /**
     * Edits, restores and new featured images, of one article or of several (a commit group's), as
     * statements. A new article counts towards its site's status (only when its row is inserted), and a
     * status change moves it between counts after reading the status it had: both in a transaction,
     * where the batch is projected event by event and the per-site counts written once, at the end.
     */
    project(events, at) {
      if (at.trx !== undefined) return projectInTransaction(events, at.trx, memory, language);
      const runs = runsOf(events);
      const revisionRuns = runs.map((run) => run.filter(isRevisionEvent));
      if (!revisionRuns.every((run, index) => run.length === runs[index]?.length)) return IN_TRANSACTION;
      const [only] = revisionRuns;
      return only !== undefined && revisionRuns.length === 1
        ? revisionStatements(only, at.appended(streamOf(only)), memory, language)
        : groupRevisionStatements(revisionRuns, at.appended(ROW_STREAM), memory, language);
    },
  });
}

/** A batch in a transaction: each event in turn, the per-site counts written once, at the end. */
async function projectInTransaction(
  events: readonly Pending<ArticleEvent>[],
  trx: Trx,
  memory: HtmlMemory | undefined,
  language: string,
): Promise<readonly Statement[]> {
  const counts: CountChanges = new Map();
  for (const event of events) await project(event, trx, counts, memory, language);
  await writeCounts(trx, counts);
  return [];
}

/** The stream of a run's events. */
function streamOf(run: readonly Pending<ArticleEvent>[]): string {
  const [first] = run;
  if (first === undefined) throw new Error('a run of article events is never empty');
  return first.streamId;
}

/** The events that change an article's content, and so its list and body rows (not creation, not status). */
function isRevisionEvent(
  event: Pending<ArticleEvent>,
): event is Pending<ArticleEdited | ArticleRestored | FeaturedImageReplaced> {
  return (
    event.type === 'ArticleEdited' ||
    event.type === 'ArticleRestored' ||
    event.type === 'FeaturedImageReplaced'
  );
}

/** The projector without an html memory (rebuilds, status, the async runner). */
export const articlesProjector = createArticlesProjector();

/**
 * The search words of a body (`article_bodies.search`, weight C), in the configuration `language`:
 * PostgreSQL's parser skips its tags and character references.
 */
function bodyVector(language: string, body: Expression<string>): RawBuilder<string> {
  return sql<string>`setweight(to_tsvector(${language}::regconfig, ${body}), 'C')`;
}

/**
 * The search words of a title and target keyword (`article_title_search.search`, weights A and B):
 * a row of their own, so that a new title writes a few words, never the body's again.
 */
function titleVector(
  language: string,
  title: Expression<string>,
  keyword: Expression<string | null>,
): RawBuilder<string> {
  return sql<string>`setweight(to_tsvector(${language}::regconfig, ${title}), 'A')
    || setweight(to_tsvector(${language}::regconfig, coalesce(${keyword}, '')), 'B')`;
}

/**
 * Edits, restores and new featured images, consecutive revisions of one article: the list row moves
 * to the last one's revision, each column to the last value the run gives it, the body row to the
 * last new body and its words, if any, and the title's words to the last new title, if any; all only
 * when the row is at the revision before the run (a replay changes nothing). Statements that read the rows as they
 * were, run as one (`runTogether`, or the append's own statement): what each event applied in turn
 * would leave.
 */
function revisionStatements(
  run: readonly Pending<ArticleEdited | ArticleRestored | FeaturedImageReplaced>[],
  when: Expression<SqlBool>,
  memory: HtmlMemory | undefined,
  language: string,
): Statement[] {
  const { articleId, before, revision, at, title, body, featuredImage } = runChange(run);
  // SQL text rather than kysely's builder: these run on every edit, and the builder's tree is the
  // costlier to make and compile (docs/performance.md, "Edits: the inline statements as SQL text").
  const sets = [sql`revision = ${revision}`, sql`updated_at = ${at}`];
  if (title !== undefined) sets.push(sql`title = ${title}`);
  if (body !== undefined) sets.push(sql`word_count = ${wordCount(body, memory)}`);
  if (featuredImage !== undefined) sets.push(sql`featured_image = ${featuredImage}`);
  const row = sql`update articles set ${sql.join(sets)}
    where id = ${articleId} and revision = ${before} and ${when}`;
  const statements = [row];
  if (title !== undefined) {
    // The title's words; the body's stay as they are.
    statements.push(sql`update article_title_search t
      set search = ${titleVector(language, sql`${title}`, sql`a.target_keyword`)}
      from articles a
      where t.article_id = ${articleId} and a.id = ${articleId} and a.revision = ${before} and ${when}`);
  }
  if (body !== undefined) {
    // The body once as a parameter, for the row and its vector.
    statements.push(sql`update article_bodies b
      set body = v.body, protected_links = ${JSON.stringify(extractProtectedLinks(body, memory))},
        search = ${bodyVector(language, sql`v.body`)}
      from articles a, (select ${body}::text as body) v
      where b.article_id = ${articleId} and a.id = ${articleId} and a.revision = ${before} and ${when}`);
  }
  return statements;
}

/**
 * What a run of revision events changes: the revision before it and its last, the last event's
 * time, and the last title, body and featured image (its JSON) the run gives, if any.
 */
function runChange(run: readonly Pending<ArticleEdited | ArticleRestored | FeaturedImageReplaced>[]) {
  const [first] = run;
  const last = run.at(-1);
  if (first === undefined || last === undefined) throw new Error('a run of article events is never empty');
  let title: string | undefined;
  let body: string | undefined;
  let featuredImage: string | undefined;
  for (const event of run) {
    if (event.type !== 'FeaturedImageReplaced') {
      title = event.data.title ?? title;
      body = event.data.body ?? body;
    }
    if (event.type !== 'ArticleEdited') featuredImage = JSON.stringify(event.data.featuredImage);
  }
  return {
    streamId: first.streamId,
    articleId: first.data.articleId,
    before: first.data.revision - 1,
    revision: last.data.revision,
    at: last.metadata.at,
    title,
    body,
    featuredImage,
  };
}

/**
 * `revisionStatements` of runs of several articles as two statements whatever their number (the
 * list rows; the body rows, when a run has a new body): each run's row as a row `r` of one JSON
 * parameter, changed when `when` holds for it (its stream's claim succeeded: `r.stream_id` is its
 * stream) and its article is at the revision before the run. A column a run does not set keeps its value.
 */
function groupRevisionStatements(
  runs: readonly (readonly Pending<ArticleEdited | ArticleRestored | FeaturedImageReplaced>[])[],
  when: Expression<SqlBool>,
  memory: HtmlMemory | undefined,
  language: string,
): Statement[] {
  const changes = runs.filter((run) => run.length > 0).map(runChange);
  const rows = changes.map((c) => ({
    stream_id: c.streamId,
    id: c.articleId,
    before: c.before,
    revision: c.revision,
    updated_at: c.at,
    set_title: c.title !== undefined,
    title: c.title ?? null,
    set_words: c.body !== undefined,
    word_count: c.body === undefined ? null : wordCount(c.body, memory),
    set_image: c.featuredImage !== undefined,
    featured_image: c.featuredImage ?? null,
  }));
  const statements: Statement[] = [
    sql`update articles a set revision = r.revision, updated_at = r.updated_at,
        title = case when r.set_title then r.title else a.title end,
        word_count = case when r.set_words then r.word_count else a.word_count end,
        featured_image = case when r.set_image then r.featured_image::jsonb else a.featured_image end
      from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as r (stream_id text, id text, before integer,
        revision integer, updated_at timestamptz, set_title boolean, title text, set_words boolean,
        word_count integer, set_image boolean, featured_image text)
      where a.id = r.id and a.revision = r.before and ${when}`,
  ];
  const bodies = changes.flatMap((c) =>
    c.body === undefined
      ? []
      : [
          {
            stream_id: c.streamId,
            id: c.articleId,
            before: c.before,
            body: c.body,
            protected_links: JSON.stringify(extractProtectedLinks(c.body, memory)),
          },
        ],
  );
  if (bodies.length > 0) {
    statements.push(sql`update article_bodies b set body = r.body, protected_links = r.protected_links::jsonb,
        search = ${bodyVector(language, sql`r.body`)}
      from jsonb_to_recordset(${JSON.stringify(bodies)}::jsonb) as r (stream_id text, id text, before integer,
        body text, protected_links text), articles a
      where b.article_id = r.id and a.id = r.id and a.revision = r.before and ${when}`);
  }
  const titles = changes.flatMap((c) =>
    c.title === undefined
      ? []
      : [{ stream_id: c.streamId, id: c.articleId, before: c.before, title: c.title }],
  );
  if (titles.length > 0) {
    statements.push(sql`update article_title_search t
        set search = ${titleVector(language, sql`r.title`, sql`a.target_keyword`)}
      from jsonb_to_recordset(${JSON.stringify(titles)}::jsonb) as r (stream_id text, id text, before integer,
        title text), articles a
      where t.article_id = r.id and a.id = r.id and a.revision = r.before and ${when}`);
  }
  return statements;
}

/** Changes to `article_counts` by site and status, summed until they are written. */
type CountChanges = Map<string, { siteId: string; status: string; delta: number }>;

function count(counts: CountChanges, siteId: string, status: string, delta: number): void {
  const key = `${siteId}\u0000${status}`;
  const known = counts.get(key);
  if (known) known.delta += delta;
  else counts.set(key, { siteId, status, delta });
}

/**
 * Writes the count changes in one statement, in (site, status) order: every transaction that
 * changes counts locks their rows in the same order, so concurrent appends (a status change and
 * an import on one site, two imports) wait for each other instead of deadlocking.
 */
async function writeCounts(trx: Trx, counts: CountChanges): Promise<void> {
  if (counts.size === 0) return;
  const rows = [...counts.values()]
    .sort((a, b) => compare(a.siteId, b.siteId) || compare(a.status, b.status))
    .map(({ siteId, status, delta }) => ({ site_id: siteId, status, n: delta }));
  await trx
    .insertInto('article_counts')
    .values(rows)
    .onConflict((oc) =>
      oc.columns(['site_id', 'status']).doUpdateSet({ n: sql`article_counts.n + excluded.n` }),
    )
    .execute();
}

function compare(a: string, b: string): number {
  if (a < b) return -1;
  return a > b ? 1 : 0;
}

async function project(
  event: Pending<ArticleEvent>,
  trx: Trx,
  counts: CountChanges,
  memory: HtmlMemory | undefined,
  language: string,
): Promise<void> {
  const at = event.metadata.at;
  switch (event.type) {
    case 'ArticleCreated': {
      const d = event.data;
      const created = evolve(initialState, event);
      if (!created.exists) throw new Error(`ArticleCreated ${d.articleId} makes no article`);
      const row = articleRowOf(created, wordCount(d.body, memory));
      const inserted = await trx
        .insertInto('articles')
        .values({
          ...row,
          account_id: d.accountId,
          featured_image: JSON.stringify(row.featured_image),
          created_at: at,
        })
        .onConflict((oc) => oc.column('id').doNothing())
        .executeTakeFirst();
      if ((inserted.numInsertedOrUpdatedRows ?? 0n) > 0n) count(counts, d.siteId, d.status, 1);
      // The body once as a parameter, for the row and its search vector.
      await sql`insert into article_bodies (article_id, body, protected_links, search)
        select ${d.articleId}, v.body, ${JSON.stringify(extractProtectedLinks(d.body, memory))}::jsonb,
          ${bodyVector(language, sql`v.body`)}
        from (select ${d.body}::text as body) v
        on conflict (article_id) do nothing`.execute(trx);
      await sql`insert into article_title_search (article_id, search)
        values (${d.articleId}, ${titleVector(language, sql`${d.title}`, sql`${d.targetKeyword}`)})
        on conflict (article_id) do nothing`.execute(trx);
      return;
    }
    case 'ArticleEdited':
    case 'ArticleRestored':
    case 'FeaturedImageReplaced':
      await runTogether(trx, revisionStatements([event], ALWAYS, memory, language));
      return;
    case 'ArticleStatusChanged': {
      const before = await trx
        .selectFrom('articles')
        .select(['site_id', 'status'])
        .where('id', '=', event.data.articleId)
        .where('revision', '=', event.data.revision - 1)
        .executeTakeFirst();
      if (!before) return;
      await trx
        .updateTable('articles')
        .set({
          revision: event.data.revision,
          updated_at: at,
          status: event.data.status,
          published_at: event.data.publishedAt,
        })
        .where('id', '=', event.data.articleId)
        .execute();
      if (before.status !== event.data.status) {
        count(counts, before.site_id, before.status, -1);
        count(counts, before.site_id, event.data.status, 1);
      }
      return;
    }
    default:
      return unhandled('articles', event);
  }
}

/** An article of a list: its row without the account and creation time. */
export type ArticleRow = Omit<Selectable<ArticlesTable>, 'account_id' | 'created_at'>;
/** An article with its body and the body's protected links. */
export type ArticleDetailRow = ArticleRow & Pick<Selectable<ArticleBodiesTable>, 'body' | 'protected_links'>;
/** An article with its body as JSON text (`body_json`, escaped when it was stored) and its protected links. */
export type ArticleJsonRow = ArticleRow &
  Pick<Selectable<ArticleBodiesTable>, 'body_json' | 'protected_links'>;

/**
 * The row of an article at a state, with its body's word count: what the projector writes for it, an
 * edit answers with (`detailOf`) and a webhook message carries, the one mapping of the three.
 */
export function articleRowOf(state: Article, words: number): ArticleRow {
  return {
    id: state.articleId,
    site_id: state.siteId,
    title: state.title,
    url: state.url,
    status: state.status,
    published_at: state.publishedAt === null ? null : new Date(state.publishedAt),
    target_keyword: state.targetKeyword,
    word_count: words,
    featured_image: state.featuredImage,
    revision: state.revision,
    updated_at: new Date(state.updatedAt),
  };
}

/**
 * The row `findArticle` reads once the article's events up to `state` are projected. An edit answers
 * with it instead of reading the row back. `memory`: the html memory the decider left the body's facts in.
 */
export function detailOf(state: Article, memory?: HtmlMemory): ArticleDetailRow {
  return {
    ...articleRowOf(state, wordCount(state.body, memory)),
    body: state.body,
    protected_links: extractProtectedLinks(state.body, memory),
  };
}

export type ArticleListQuery = PageQuery & {
  /** Inclusive UTC calendar dates on published_at. */
  from?: string | undefined;
  to?: string | undefined;
  status?: ArticleRow['status'] | undefined;
};

const listColumns = [
  'a.id',
  'a.site_id',
  'a.title',
  'a.url',
  'a.status',
  'a.published_at',
  'a.target_keyword',
  'a.word_count',
  'a.featured_image',
  'a.revision',
  'a.updated_at',
] as const;

/** The articles of the scope's site that the query's filters keep. */
function articlesOf(db: Db, scope: SiteScope, q: ArticleListQuery) {
  let base = db
    .selectFrom('articles as a')
    .where('a.site_id', '=', scope.siteId)
    .where('a.account_id', '=', scope.accountId);
  if (q.status) base = base.where('a.status', '=', q.status);
  if (q.from) base = base.where('a.published_at', '>=', sql<Date>`${q.from}::date::timestamptz`);
  if (q.to) base = base.where('a.published_at', '<', sql<Date>`(${q.to}::date + 1)::timestamptz`);
  return base;
}

/** The statement of a page of `listArticles` (the benchmark's floor runs it too). */
export function articlePage(db: Db, scope: SiteScope, q: ArticleListQuery) {
  return articlesOf(db, scope, q)
    .select(listColumns)
    .orderBy(sql`a.published_at desc nulls last`)
    .orderBy('a.id', 'desc')
    .limit(q.perPage)
    .offset(offsetOf(q));
}

/**
 * Articles of one site of the account, newest published first, ties by id; unpublished (no date)
 * last. Undefined for a site that is not the account's (unknown or another account's alike).
 */
export async function listArticles(
  db: Db,
  scope: SiteScope,
  q: ArticleListQuery,
): Promise<Page<ArticleRow> | undefined> {
  const base = articlesOf(db, scope, q);
  // Without a date range the total is a lookup in article_counts; with one, the range is counted.
  // The statement of the total also says whose the site is.
  const counted =
    q.from || q.to
      ? base
          .select((eb) => [eb.fn.countAll<string>().as('n'), siteOwner(scope), keyLive(scope.liveKey)])
          .executeTakeFirstOrThrow()
      : db
          .selectFrom('article_counts')
          .select((eb) => [
            eb.fn.coalesce(eb.fn.sum<string>('n'), sql<string>`0`).as('n'),
            siteOwner(scope),
            keyLive(scope.liveKey),
          ])
          .where('site_id', '=', scope.siteId)
          .$if(q.status !== undefined, (qb) => qb.where('status', '=', q.status as string))
          .executeTakeFirstOrThrow();
  const [rows, count] = await Promise.all([articlePage(db, scope, q).execute(), counted]);
  return inScope(scope, count, () => ({ rows, total: Number(count.n) }));
}

/**
 * The site of one article of the account, without reading its body: undefined for an unknown id and
 * another account's id alike (the check before a write or a revision list). With `liveKey`, the
 * statement also confirms the API key is not revoked, as `findArticle` does.
 */
export async function findArticleSite(
  db: Db,
  accountId: string,
  articleId: string,
  liveKey?: string,
): Promise<string | undefined> {
  const [row] =
    liveKey === undefined
      ? await articleSite(db, { articleId, accountId, keyId: '' })
      : await articleSiteWithKey(db, { articleId, accountId, keyId: liveKey });
  await confirmLive(db, liveKey, row);
  return row?.site_id;
}

/** The article's current revision, when it is the account's: what an `If-Match` is checked against ahead of a write. */
export async function findArticleRevision(
  db: Db,
  accountId: string,
  articleId: string,
): Promise<number | undefined> {
  const row = await db
    .selectFrom('articles')
    .select('revision')
    .where('id', '=', articleId)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  return row?.revision;
}

/**
 * An article's site and current revision, when it is the account's, without reading its body: what a
 * conditional read (If-None-Match) is answered from. With `liveKey`, the statement also confirms the
 * API key is not revoked, as `findArticle` does.
 */
export async function findArticleHead(
  db: Db,
  accountId: string,
  articleId: string,
  liveKey?: string,
): Promise<{ siteId: string; revision: number } | undefined> {
  const [row] = await (liveKey === undefined ? articleHead : articleHeadWithKey)(db, {
    articleId,
    accountId,
    keyId: liveKey ?? '',
  });
  await confirmLive(db, liveKey, row);
  return row ? { siteId: row.site_id, revision: row.revision } : undefined;
}

/**
 * The title and account of each of these articles that exists, by id (a page's worth: support staff's
 * audit, whose entries name articles of any account).
 */
export async function articleTitles(
  db: Db,
  articleIds: readonly string[],
): Promise<Map<string, { id: string; title: string; accountId: string }>> {
  if (articleIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('articles')
    .select(['id', 'title', 'account_id'])
    .where('id', 'in', [...new Set(articleIds)])
    .execute();
  return new Map(rows.map((r) => [r.id, { id: r.id, title: r.title, accountId: r.account_id }]));
}

/** Whose an article is, whatever the account: for support staff, who may look at any account. */
export async function findArticleOwner(
  db: Db,
  articleId: string,
): Promise<{ accountId: string; title: string } | undefined> {
  const row = await db
    .selectFrom('articles')
    .select(['account_id', 'title'])
    .where('id', '=', articleId)
    .executeTakeFirst();
  return row ? { accountId: row.account_id, title: row.title } : undefined;
}

/** The statement of `findArticleSite` (before every write to an article), compiled once: with the key check and without. */
const articleSiteQuery = (withKey: boolean) =>
  prepared(
    (db, v: { articleId: string; accountId: string; keyId: string }) =>
      db
        .selectFrom('articles')
        .select(['site_id', keyLive(withKey ? v.keyId : undefined)])
        .where('id', '=', v.articleId)
        .where('account_id', '=', v.accountId),
    withKey ? ['articleId', 'accountId', 'keyId'] : ['articleId', 'accountId'],
  );
const articleSiteWithKey = articleSiteQuery(true);
const articleSite = articleSiteQuery(false);

/** The statement of `findArticleHead`, compiled once: with the key check and without. */
const articleHeadQuery = (withKey: boolean) =>
  prepared(
    (db, v: { articleId: string; accountId: string; keyId: string }) =>
      db
        .selectFrom('articles')
        .select(['site_id', 'revision', keyLive(withKey ? v.keyId : undefined)])
        .where('id', '=', v.articleId)
        .where('account_id', '=', v.accountId),
    withKey ? ['articleId', 'accountId', 'keyId'] : ['articleId', 'accountId'],
  );
const articleHeadWithKey = articleHeadQuery(true);
const articleHead = articleHeadQuery(false);

/** Refuses a revoked key, as a statement with a `key_live` column found it (or, with no row, a lookup). */
async function confirmLive(db: Db, liveKey: string | undefined, row: { key_live: boolean } | undefined) {
  if (liveKey !== undefined && (row ? !row.key_live : !(await isKeyLive(db, liveKey))))
    throw invalidKeyError();
}

/** The statement of `findArticle` (or, `body_json`, of `findArticleJson`), compiled once: with the key check and without. */
const articleQuery = (withKey: boolean, body: 'b.body' | 'b.body_json') =>
  prepared(
    (db, v: { articleId: string; accountId: string; keyId: string }) =>
      db
        .selectFrom('articles as a')
        .innerJoin('article_bodies as b', 'b.article_id', 'a.id')
        .select([...listColumns, body, 'b.protected_links', keyLive(withKey ? v.keyId : undefined)])
        .where('a.id', '=', v.articleId)
        .where('a.account_id', '=', v.accountId),
    withKey ? ['articleId', 'accountId', 'keyId'] : ['articleId', 'accountId'],
  );
const articleQueries = { plain: articleQuery(false, 'b.body'), keyed: articleQuery(true, 'b.body') };
const articleJsonQueries = {
  plain: articleQuery(false, 'b.body_json'),
  keyed: articleQuery(true, 'b.body_json'),
};

/**
 * One article of the account with its body; undefined for an unknown id and another account's id
 * alike. With `liveKey`, the statement also confirms the API key is not revoked (a revoked key is
 * refused; when there is no such article, the key is looked up on its own).
 */
export function findArticle(
  db: Db,
  accountId: string,
  articleId: string,
  liveKey?: string,
): Promise<ArticleDetailRow | undefined> {
  return findOne(articleQueries, db, accountId, articleId, liveKey);
}

/** `findArticle` with the body as its JSON text, as stored (`body_json`): what the API's answer embeds. */
export function findArticleJson(
  db: Db,
  accountId: string,
  articleId: string,
  liveKey?: string,
): Promise<ArticleJsonRow | undefined> {
  return findOne(articleJsonQueries, db, accountId, articleId, liveKey);
}

type ArticleStatement<R> = (
  db: Db,
  values: { articleId: string; accountId: string; keyId: string },
) => Promise<(R & { key_live: boolean })[]>;

async function findOne<R>(
  queries: { plain: ArticleStatement<R>; keyed: ArticleStatement<R> },
  db: Db,
  accountId: string,
  articleId: string,
  liveKey: string | undefined,
): Promise<R | undefined> {
  const [row] = await (liveKey === undefined ? queries.plain : queries.keyed)(db, {
    articleId,
    accountId,
    keyId: liveKey ?? '',
  });
  await confirmLive(db, liveKey, row);
  if (!row) return undefined;
  const { key_live: _, ...found } = row;
  return found as R;
}

/** A page of the articles scheduled for publication, by id after `after`: what the publication sweep plans. */
export function listScheduledArticles(
  db: Db,
  after: string,
  limit: number,
): Promise<Pick<ArticleRow, 'id' | 'published_at'>[]> {
  return db
    .selectFrom('articles')
    .select(['id', 'published_at'])
    .where('status', '=', 'scheduled')
    .where('id', '>', after)
    .orderBy('id')
    .limit(limit)
    .execute();
}

/** An article's publication as the read model holds it: its account, status, time and revision. */
export function findArticlePublication(
  db: Db,
  articleId: string,
): Promise<
  Pick<Selectable<ArticlesTable>, 'account_id' | 'status' | 'published_at' | 'revision'> | undefined
> {
  return db
    .selectFrom('articles')
    .select(['account_id', 'status', 'published_at', 'revision'])
    .where('id', '=', articleId)
    .executeTakeFirst();
}

/** A full-text search of the account's articles (`searchArticles`). */
export type ArticleSearchQuery = PageQuery & {
  accountId: string;
  /** The API key to confirm unrevoked in the same statement, if any. */
  liveKey?: string | undefined;
  /** The search in web-search syntax (`websearch_to_tsquery`). */
  text: string;
  /** The text search configuration the vectors were made with (SEARCH_LANGUAGE). */
  language: string;
  siteId?: string | undefined;
  status?: ArticleRow['status'] | undefined;
  /** Inclusive UTC calendar dates on published_at. */
  from?: string | undefined;
  to?: string | undefined;
};

/** An article a search found: its list row, its relevance and `ts_headline`'s excerpt of its body (`MARK_START`/`MARK_END` around matches). */
export type ArticleSearchRow = ArticleRow & { score: number; headline: string };

/**
 * What a search found: a page of articles; or `nothing_searchable` when the text has no word to
 * search for (only stop words or signs); or `not_own_site` when the site it is limited to is not the
 * account's (unknown or another account's alike).
 */
export type ArticleSearchResult =
  | { kind: 'page'; page: Page<ArticleSearchRow> }
  | { kind: 'nothing_searchable' }
  | { kind: 'not_own_site' };

/** How `ts_headline` cuts an excerpt: up to two fragments around matches, marked with control characters. */
const HEADLINE_OPTIONS = `StartSel=${MARK_START}, StopSel=${MARK_END}, MaxFragments=2, MaxWords=15, MinWords=5, ShortWord=2, FragmentDelimiter=" … "`;

/**
 * The first SNIPPET_SEARCHED_FIRST characters of a body, less a tag, character reference or word the
 * cut goes through: where a snippet is looked for first (`searchArticles`).
 */
function bodyStart(body: Expression<string>): RawBuilder<string> {
  return sql<string>`case when length(${body}) <= ${SNIPPET_SEARCHED_FIRST} then ${body}
    else regexp_replace(left(${body}, ${SNIPPET_SEARCHED_FIRST}), '(<[^>]*|&[#a-zA-Z0-9]*|[^[:space:]<>]+)$', '') end`;
}

/**
 * The newest SEARCH_RANKED_MAX articles of the account that match a search (`searchArticles`), each
 * with its relevance (`id, published_at, score`). Each side (the title and keyword's words, the
 * body's) gives its newest that many matches, read newest first from `articles_account_published` when
 * the words are common or found by the side's GIN index when they are rare: for the titles as
 * `walksTitles` counted (`titlesWalked`), for the bodies as the planner judges from the vectors'
 * statistics; the newest that many of both are the newest of all, and an article
 * on both sides adds up its two ranks. An excluded word (`-word`) is looked for on both sides: the
 * side that matched is tested again beside the other's words (the title's first, as a phrase's words
 * count positions). A text of only common words makes an empty query, which matches nothing: not even
 * looked for.
 */
function searchCandidates(
  q: ArticleSearchQuery,
  tsquery: RawBuilder<unknown>,
  titlesWalked: boolean,
): RawBuilder<unknown> {
  const filters = [sql`numnode(${tsquery}) > 0`, sql`a.account_id = ${q.accountId}`];
  if (q.siteId !== undefined) filters.push(sql`a.site_id = ${q.siteId}`);
  if (q.status !== undefined) filters.push(sql`a.status = ${q.status}`);
  if (q.from) filters.push(sql`a.published_at >= ${q.from}::date::timestamptz`);
  if (q.to) filters.push(sql`a.published_at < (${q.to}::date + 1)::timestamptz`);
  const excludes = q.text.includes('-');
  const matches = (both: RawBuilder<unknown>) =>
    excludes ? [sql`s.search @@ ${tsquery}`, sql`${both} @@ ${tsquery}`] : [sql`s.search @@ ${tsquery}`];
  const rank = sql`ts_rank(s.search, ${tsquery})`;
  const newest = sql`order by a.published_at desc nulls last, a.id desc limit ${SEARCH_RANKED_MAX}`;
  const side = (table: 'article_title_search' | 'article_bodies', both: RawBuilder<unknown>) =>
    sql`(select a.id, a.published_at, ${rank} as score
      from ${sql.table(table)} s join articles a on a.id = s.article_id
      where ${sql.join([...filters, ...matches(both)], sql` and `)} ${newest})`;
  const titleBoth = sql`s.search || (select o.search from article_bodies o where o.article_id = a.id)`;
  // Read newest first: the account's list, each title's words tested (a lateral subquery kept apart,
  // so that the list drives), until SEARCH_RANKED_MAX match.
  const title = titlesWalked
    ? sql`(select a.id, a.published_at, t.score
        from articles a cross join lateral (
          select ${rank} as score from article_title_search s
          where s.article_id = a.id and ${sql.join(matches(titleBoth), sql` and `)} offset 0) t
        where ${sql.join(filters, sql` and `)} ${newest})`
    : side('article_title_search', titleBoth);
  const body = side(
    'article_bodies',
    sql`(select o.search from article_title_search o where o.article_id = a.id) || s.search`,
  );
  return sql`select id, published_at, sum(score) as score
    from (${title} union all ${body}) m
    group by id, published_at
    order by published_at desc nulls last, id desc
    limit ${SEARCH_RANKED_MAX}`;
}

/** A search's text as a query in its language (web-search syntax). */
function webSearch(q: Pick<ArticleSearchQuery, 'language' | 'text'>): RawBuilder<unknown> {
  return sql`websearch_to_tsquery(${q.language}::regconfig, ${q.text})`;
}

/**
 * Whether a search reads the title side newest first (`searchCandidates`): when the titles that hold
 * its words number at least √(SEARCH_RANKED_MAX × the account's articles). Reading newest first costs
 * about SEARCH_RANKED_MAX ÷ (the share of titles that match) titles tested, finding them in the GIN
 * index costs every match joined to its list row, and the two meet there. PostgreSQL's planner makes
 * the same choice from the words' statistics, and takes words that go together (every "seasonal
 * checklist" title) as independent: it planned 1,475 title matches of 12,289, and joined them all
 * (docs/performance.md, "Search"). The titles are counted in the GIN index, every account's, up to
 * that many: a few hundredths of a millisecond for rare words, a few milliseconds for common ones. So
 * an account whose own titles seldom hold words that other accounts' titles often do reads its list
 * newest first, all of it at worst, where the index's way joined every account's matches.
 */
export async function walksTitles(
  db: Db,
  q: Pick<ArticleSearchQuery, 'accountId' | 'language' | 'text'>,
): Promise<boolean> {
  const tsquery = webSearch(q);
  const { rows } = await sql<{ walk: boolean }>`with size as materialized (
      select greatest(ceil(sqrt(${SEARCH_RANKED_MAX}::float8 * coalesce(sum(c.n), 0))), 1)::bigint as walk_from
      from sites st join article_counts c on c.site_id = st.id
      where st.account_id = ${q.accountId})
    select count(*) >= (select walk_from from size) as walk
    from (select from article_title_search s where numnode(${tsquery}) > 0 and s.search @@ ${tsquery}
      limit (select walk_from from size)) h`.execute(db);
  return rows[0]?.walk === true;
}

/**
 * The account's articles that match a search, most relevant first, then newest published, then by id
 * (`searchCandidates`). An article matches when its title and target keyword, or its body, hold what
 * the search asks for, and no word the search excludes is in any of them. Its relevance is `ts_rank`
 * of each that matches, added up: a title's words count most (weight A), then the target keyword's
 * (B), then the body's (C). Of more than SEARCH_RANKED_MAX matches, the newest that many are ranked
 * and counted, so that a search of common words costs what a search of rare ones does. A first
 * statement counts the titles that hold the words (`walksTitles`), which says how the title side is
 * read (`how.titles` says it instead, for a test to compare the two); then one statement ranks the
 * matches and keeps the page; only the page's bodies are excerpted, each from its start
 * (`bodyStart`) when a matched word is there or the body did not match (only the title did), else from
 * the whole body (`ts_headline` parses all the text it is given). The statement also confirms the API key and, with a site, whose it is; when it finds
 * nothing on the page, a second one says whether the text had anything to search for, how many
 * matched, and the same.
 */
export async function searchArticles(
  db: Db,
  q: ArticleSearchQuery,
  how: { titles?: 'walked' | 'found' } = {},
): Promise<ArticleSearchResult> {
  const tsquery = webSearch(q);
  const walked = how.titles === undefined ? await walksTitles(db, q) : how.titles === 'walked';
  const candidates = searchCandidates(q, tsquery, walked);
  const scope = q.siteId === undefined ? undefined : { accountId: q.accountId, siteId: q.siteId };
  const owner = scope === undefined ? sql`null::text as site_owner` : siteOwner(scope);
  // Planned for its words each time (NEVER_NAMED): a generic plan cannot know whether they match one
  // article (found by the GIN indexes) or nearly all (read newest first, up to SEARCH_RANKED_MAX).
  // `offset 0` keeps the start's excerpt a subquery of its own: pulled up, its `ts_headline` would be
  // copied into each of the two places that read it and run twice.
  const rows = await sql<
    ArticleSearchRow & { total: string; key_live: boolean; site_owner: string | null }
  >`${sql.raw(NEVER_NAMED)}
    with candidates as materialized (${candidates}), hits as (
      select id, published_at, score, count(*) over () as total
      from candidates
      order by score desc, published_at desc nulls last, id desc
      limit ${q.perPage} offset ${offsetOf(q)}
    )
    select ${sql.join(listColumns.map((c) => sql.ref(c)))}, h.score, h.total,
      case when length(b.body) <= ${SNIPPET_SEARCHED_FIRST} or position(${MARK_START} in first.headline) > 0
          or not b.search @@ ${tsquery}
        then first.headline
        else ts_headline(${q.language}::regconfig, b.body, ${tsquery}, ${HEADLINE_OPTIONS}) end as headline,
      ${keyLive(q.liveKey)}, ${owner}
    from hits h join articles a on a.id = h.id join article_bodies b on b.article_id = h.id,
      lateral (select ts_headline(${q.language}::regconfig, ${bodyStart(sql`b.body`)}, ${tsquery}, ${HEADLINE_OPTIONS}) as headline offset 0) first
    order by h.score desc, h.published_at desc nulls last, h.id desc`.execute(db);
  const [first] = rows.rows;
  if (first !== undefined) {
    if (!first.key_live) throw invalidKeyError();
    if (scope !== undefined && first.site_owner !== q.accountId) return { kind: 'not_own_site' };
    return {
      kind: 'page',
      page: {
        rows: rows.rows.map(({ total: _, key_live: __, site_owner: ___, ...row }) => ({
          ...row,
          score: Number(row.score),
        })),
        total: Number(first.total),
      },
    };
  }
  const said = await sql<{
    terms: number;
    total: string;
    key_live: boolean;
    site_owner: string | null;
  }>`${sql.raw(NEVER_NAMED)}
    select numnode(${tsquery}) as terms,
      case when numnode(${tsquery}) > 0 then (select count(*) from (${candidates}) m) else 0 end as total,
      ${keyLive(q.liveKey)}, ${owner}`.execute(db);
  const [answer] = said.rows;
  if (answer === undefined || !answer.key_live) throw invalidKeyError();
  if (scope !== undefined && answer.site_owner !== q.accountId) return { kind: 'not_own_site' };
  if (answer.terms === 0) return { kind: 'nothing_searchable' };
  return { kind: 'page', page: { rows: [], total: Number(answer.total) } };
}

/**
 * The account's articles (of one site, with `siteId`) whose title or id starts with `prefix` (case
 * aside), by title then id, at most `limit` of them, and how many there are in all: what an argument's
 * completion offers. Another account's site has none.
 */
export async function suggestArticles(
  db: Db,
  q: { accountId: string; siteId?: string | undefined; prefix: string; limit: number },
): Promise<{ rows: Pick<ArticleRow, 'id' | 'title'>[]; total: number }> {
  const pattern = startsWithPattern(q.prefix);
  let base = db
    .selectFrom('articles')
    .where('account_id', '=', q.accountId)
    .where((eb) =>
      eb.or([eb(eb.fn('lower', ['title']), 'like', pattern), eb(eb.fn('lower', ['id']), 'like', pattern)]),
    );
  if (q.siteId !== undefined) base = base.where('site_id', '=', q.siteId);
  const [rows, count] = await Promise.all([
    base.select(['id', 'title']).orderBy('title', 'asc').orderBy('id', 'asc').limit(q.limit).execute(),
    base.select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count.n) };
}
