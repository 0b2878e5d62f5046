import { type Expression, type RawBuilder, type SqlBool, sql } from 'kysely';
import { type Article, type ArticleState, evolve, initialState } from '../domain/article/decider.ts';
import { type ArticleEvent, articleEventTypes, articleStream } from '../domain/article/events.ts';
import type { Db } from '../infra/db/schema.ts';
import { prepared } from '../infra/db/statement-cache.ts';
import {
  ALWAYS,
  IN_TRANSACTION,
  type InlineProjector,
  type Pending,
  ROW_STREAM,
  runsOf,
  type Statement,
  type Trx,
} from '../infra/projection.ts';
import { inlineProjector } from './projector.ts';

/*
 * Snapshots of the article aggregate: `evolve` applied to the previous snapshot, in the append's
 * transaction. Commands load the snapshot and the events after it (`readArticleSnapshot`); like every
 * read model it can be dropped and rebuilt from the events.
 *
 * A snapshot holds the state without its body: the body is in `article_bodies`, which the articles
 * projector writes in the same transaction, and `readArticleSnapshot` joins it back, so an edit does
 * not read or write the body twice (docs/performance.md, "Snapshots").
 */
/**
 * The snapshots projector. With `memory` (the runtime's), it starts a run of events from the snapshot
 * the command read before it (`readArticleSnapshot` with the same memory) instead of reading it again,
 * and can then write it within the append's statement. Without, it reads the previous snapshot in a
 * transaction (rebuilds, tools).
 */
export function createArticleSnapshotsProjector(memory?: SnapshotMemory): InlineProjector<ArticleEvent> {
  return inlineProjector({
    name: 'article_snapshots@1',
    mode: 'inline',
    handles: articleEventTypes,
    tables: ['article_snapshots', 'article_snapshot_history'],
    /**
     * Each article's run from the snapshot its command read, the snapshot after its last event written
     * once: one statement for one article or several (a commit group's). In a transaction, event by
     * event, each from the snapshot before it, read when it is not the one remembered.
     */
    project(events, at) {
      if (at.trx !== undefined) return projectInTransaction(events, at.trx);
      const rows: { stream_id: string; article_id: string; version: number; state: unknown }[] = [];
      const kept: typeof rows = [];
      const runs = runsOf(events);
      for (const run of runs) {
        const [first] = run;
        const last = run.at(-1);
        if (first === undefined || last === undefined) continue;
        const known = memory?.recall(first.data.articleId);
        if (known?.version !== first.version - 1) return IN_TRANSACTION;
        const state = stateAfter(run, known);
        if (runs.length === 1) {
          const when = at.appended(first.streamId);
          const statements = [upsert(last, state, when)];
          if (passesHistoryMark(first.version, last.version)) statements.push(keep(last, state, when));
          return statements;
        }
        const row = {
          stream_id: first.streamId,
          article_id: last.data.articleId,
          version: last.version,
          state,
        };
        rows.push(row);
        if (passesHistoryMark(first.version, last.version)) kept.push(row);
      }
      const statements = [
        sql`insert into article_snapshots (article_id, version, state)
          select r.article_id, r.version, r.state
            from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as r (stream_id text, article_id text, version integer, state jsonb)
           where ${at.appended(ROW_STREAM)}
           order by r.article_id
          on conflict (article_id) do update set version = excluded.version, state = excluded.state`,
      ];
      if (kept.length > 0) {
        statements.push(sql`insert into article_snapshot_history (article_id, version, state)
          select r.article_id, r.version, r.state
            from jsonb_to_recordset(${JSON.stringify(kept)}::jsonb) as r (stream_id text, article_id text, version integer, state jsonb)
           where ${at.appended(ROW_STREAM)}
          on conflict (article_id, version) do nothing`);
      }
      return statements;
    },
  });

  /** Each event from the snapshot before it: the remembered one, or else the one read. */
  async function projectInTransaction(
    events: readonly Pending<ArticleEvent>[],
    trx: Trx,
  ): Promise<readonly Statement[]> {
    for (const event of events) {
      const articleId = event.data.articleId;
      const known = memory?.recall(articleId);
      const previous =
        known?.version === event.version - 1
          ? known
          : await trx
              .selectFrom('article_snapshots')
              .select(['version', 'state'])
              .where('article_id', '=', articleId)
              .executeTakeFirst();
      if (previous && previous.version >= event.version) continue;
      const state = stateAfter([event], previous);
      await upsert(event, state, ALWAYS).execute(trx);
      if (passesHistoryMark(event.version, event.version)) await keep(event, state, ALWAYS).execute(trx);
    }
    return [];
  }
}

/**
 * Every this many versions an article's state is also kept in `article_snapshot_history`: the article
 * at a past revision folds at most about this many events from the nearest one (`readSnapshotAtOrBefore`).
 */
export const SNAPSHOT_HISTORY_EVERY = 50;

/** Whether a run of versions from `first` to `last` reaches a multiple of SNAPSHOT_HISTORY_EVERY. */
function passesHistoryMark(first: number, last: number): boolean {
  return Math.floor(last / SNAPSHOT_HISTORY_EVERY) > Math.floor((first - 1) / SNAPSHOT_HISTORY_EVERY);
}

/** The snapshot at `last`, the run's last event: `state` is the state after it, as stored. */
function upsert(last: Pending<ArticleEvent>, state: unknown, when: Expression<SqlBool>): RawBuilder<unknown> {
  // SQL text rather than kysely's builder: this runs on every edit (see articles.ts).
  return sql`insert into article_snapshots (article_id, version, state)
    select ${last.data.articleId}::text, ${last.version}::integer, ${JSON.stringify(state)}::jsonb where ${when}
    on conflict (article_id) do update set version = excluded.version, state = excluded.state`;
}

/** The same state kept in the history, at a run that reached a multiple of SNAPSHOT_HISTORY_EVERY. */
function keep(last: Pending<ArticleEvent>, state: unknown, when: Expression<SqlBool>): RawBuilder<unknown> {
  return sql`insert into article_snapshot_history (article_id, version, state)
    select ${last.data.articleId}::text, ${last.version}::integer, ${JSON.stringify(state)}::jsonb where ${when}
    on conflict (article_id, version) do nothing`;
}

/** The state after a run of events, from the snapshot before the first (none: the initial state), as stored. */
function stateAfter(
  events: readonly Pending<ArticleEvent>[],
  previous: { version: number; state: unknown } | undefined,
): unknown {
  // The body is not stored: an event without one (a title edit) leaves this stand-in, dropped below.
  const before = previous
    ? ({ ...(previous.state as Omit<Article, 'body'>), body: '' } as Article)
    : initialState;
  return withoutBody(events.reduce<ArticleState>(evolve, before));
}

/** The state of an article at a stream version (as stored, without its body; as remembered, with it). */
export type StoredSnapshot = { version: number; state: unknown };

/**
 * The states of the articles this runtime's commands read or wrote last, by article: the state at the
 * version a command read (`readArticleSnapshot`, body joined back) or at the version its own append
 * made (the command handler's `remember`). The state at a stream version never changes, so a
 * remembered one is right whatever happened since; whether it is still the stream's head is for the
 * append to find out (its expected version). Two readers:
 *
 * - the next command on the article starts from it instead of reading the snapshot (`startOf`); an
 *   append that finds the stream moved on (another process wrote) is decided again from a read;
 * - the snapshots projector, applying the event that follows it, starts from it instead of reading it.
 *
 * Owned by a runtime (apps/runtime.ts), which hands the same memory to its commands and its projector;
 * it keeps the `capacity` articles used last, and forgets the oldest while their bodies together are
 * over `maxBodyBytes` (a body is up to 2 MiB).
 */
export type SnapshotMemory = {
  recall(articleId: string): StoredSnapshot | undefined;
  remember(articleId: string, snapshot: StoredSnapshot): void;
  /** Forgets an article's state: the next command on it reads its snapshot. */
  forget(articleId: string): void;
  readonly size: number;
  readonly capacity: number;
};

/** What the remembered bodies may hold together, in UTF-16 code units, by default. */
export const SNAPSHOT_MEMORY_BODY_BYTES = 16 * 1024 * 1024;

export function createSnapshotMemory(
  capacity: number,
  maxBodyBytes: number = SNAPSHOT_MEMORY_BODY_BYTES,
): SnapshotMemory {
  if (!Number.isSafeInteger(capacity) || capacity < 1) {
    throw new RangeError(`the snapshot memory needs a capacity of at least 1, not ${capacity}`);
  }
  // A Map keeps insertion order: re-inserting on each use keeps the oldest used first.
  const snapshots = new Map<string, StoredSnapshot>();
  let bodies = 0;
  const drop = (articleId: string): void => {
    const known = snapshots.get(articleId);
    if (known === undefined) return;
    bodies -= bodyLength(known);
    snapshots.delete(articleId);
  };
  return {
    recall: (articleId) => snapshots.get(articleId),
    remember(articleId, snapshot) {
      drop(articleId);
      const length = bodyLength(snapshot);
      if (length > maxBodyBytes) return;
      snapshots.set(articleId, snapshot);
      bodies += length;
      while (snapshots.size > capacity || bodies > maxBodyBytes) {
        const oldest = snapshots.keys().next().value;
        if (oldest === undefined) break;
        drop(oldest);
      }
    },
    forget: drop,
    get size() {
      return snapshots.size;
    },
    capacity,
  };
}

function bodyLength(snapshot: StoredSnapshot): number {
  const state = snapshot.state as { body?: unknown } | null;
  return typeof state === 'object' && state !== null && typeof state.body === 'string'
    ? state.body.length
    : 0;
}

function withoutBody(state: ArticleState): Omit<Article, 'body'> | ArticleState {
  if (!state.exists) return state;
  const { body: _, ...rest } = state;
  return rest;
}

/** The statement of `readArticleSnapshot` (before every command on an article), compiled once. */
const snapshotQuery = prepared(
  (db, v: { articleId: string; streamId: string }) =>
    db
      .selectFrom('article_snapshots as s')
      .innerJoin('streams as st', (join) => join.on('st.stream_id', '=', v.streamId))
      .innerJoin('articles as a', (join) =>
        join.onRef('a.id', '=', 's.article_id').onRef('a.revision', '=', 's.version'),
      )
      .innerJoin('article_bodies as b', 'b.article_id', 's.article_id')
      .select(['s.version', 's.state', 'st.version as stream_version', 'b.body'])
      .where('s.article_id', '=', v.articleId),
  ['articleId', 'streamId'],
);

/**
 * The snapshot of an article with its body, and, read in the same statement, its stream's version:
 * when they are equal no event follows the snapshot, and the command needs no second read. The body
 * row is taken only when the article's row is at the snapshot's revision (the articles projector
 * writes both in the same transaction); otherwise there is no snapshot and the stream is folded.
 * `memory` (the runtime's) remembers the state read, for the command and the projector that follow.
 */
export async function readArticleSnapshot(
  db: Db,
  articleId: string,
  memory?: SnapshotMemory,
): Promise<{ version: number; state: ArticleState; streamVersion: number } | undefined> {
  const [row] = await snapshotQuery(db, { articleId, streamId: articleStream(articleId) });
  if (!row) return undefined;
  const stored = row.state as ArticleState;
  const state: ArticleState = stored.exists ? { ...stored, body: row.body } : stored;
  memory?.remember(articleId, { version: row.version, state });
  return { version: row.version, state, streamVersion: row.stream_version };
}

/**
 * The newest kept state of an article at or before `version` (`article_snapshot_history`, without its
 * body), or undefined when none is: the start of a fold to a past revision.
 */
export async function readSnapshotAtOrBefore(
  db: Db,
  articleId: string,
  version: number,
): Promise<StoredSnapshot | undefined> {
  return db
    .selectFrom('article_snapshot_history')
    .select(['version', 'state'])
    .where('article_id', '=', articleId)
    .where('version', '<=', version)
    .orderBy('version', 'desc')
    .limit(1)
    .executeTakeFirst();
}
