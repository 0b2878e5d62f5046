import { sql } from 'kysely';
import type { Db } from '../db/schema.ts';
import type { MediaEntry, MediaStore } from '../media/store.ts';

/*
 * The housekeeping jobs: plain functions of their dependencies that return a summary. The background
 * side runs them as repeatable jobs (apps/worker/jobs/housekeeping.ts); the CLI runs some by hand
 * (`media gc`, `idempotency purge`). Several processes may run them at once: every delete is
 * idempotent and decided on the state of the moment, in the statement that deletes (see each function).
 */

const HOUR_MS = 3_600_000;

/** How long an unreferenced image is kept: longer than any write in flight (store, then append) lasts. */
export const DEFAULT_MEDIA_GRACE_HOURS = 24;

/** How many candidate keys one reference query asks about. */
const REFERENCE_BATCH = 500;

/**
 * The events that carry a featured image (the creation, a replacement, a restore: every revision
 * counts, since a restore may bring any earlier image back). The partial index of migration
 * 2026-11-23-012 covers exactly these types, with exactly the expression below.
 */
const FEATURED_IMAGE_EVENTS = ['ArticleCreated', 'FeaturedImageReplaced', 'ArticleRestored'] as const;
const imageKey = sql<string>`substring(data -> 'featuredImage' ->> 'url' from '/media/([0-9a-f]{64}\\.[a-z]+)$')`;

type MediaCollection = {
  /** Files looked at (stored images and leftovers of interrupted writes). */
  scanned: number;
  /** Images some event refers to: kept. */
  referenced: number;
  /** Unreferenced files stored within the grace period: kept for now. */
  young: number;
  /** Unreferenced files older than the grace period: removed (or, with `dryRun`, that would be). */
  removed: number;
  removedBytes: number;
  dryRun: boolean;
};

/** Which of `keys` an event of any article (any revision) refers to as its featured image. */
async function referencedKeys(db: Db, keys: readonly string[]): Promise<Set<string>> {
  if (keys.length === 0) return new Set();
  const rows = await db
    .selectFrom('events')
    .select(imageKey.as('key'))
    .distinct()
    // Literals, not parameters: the planner must see that the partial index's condition holds.
    .where(sql<boolean>`type in (${sql.join(FEATURED_IMAGE_EVENTS.map((t) => sql.lit(t)))})`)
    .where(imageKey, 'in', [...keys])
    .execute();
  return new Set(rows.map((r) => r.key));
}

/**
 * The media collector: removes the files of the media store that no event refers to and that were
 * stored more than `graceHours` ago. An image stored for a write that was then refused (a concurrent
 * edit made its revision stale) is such a file; so is the leftover of an interrupted write. The grace
 * period protects a write in flight: its image is stored before its event is appended. A put of bytes
 * already stored renews them, and `MediaStore.remove` judges the file again as it removes it, so an
 * image stored again while the collector runs stays.
 */
export async function collectMedia(deps: {
  db: Db;
  media: MediaStore;
  now: () => Date;
  graceHours?: number;
  dryRun?: boolean;
  /** Called as files are looked at: how many so far. */
  onProgress?: (scanned: number) => void;
}): Promise<MediaCollection> {
  const graceHours = deps.graceHours ?? DEFAULT_MEDIA_GRACE_HOURS;
  const cutoff = new Date(deps.now().getTime() - graceHours * HOUR_MS);
  const summary: MediaCollection = {
    scanned: 0,
    referenced: 0,
    young: 0,
    removed: 0,
    removedBytes: 0,
    dryRun: deps.dryRun ?? false,
  };
  let candidates: MediaEntry[] = [];
  const judge = async (): Promise<void> => {
    const stored = candidates.filter((c) => c.stored).map((c) => c.key);
    const referenced = await referencedKeys(deps.db, stored);
    for (const entry of candidates) {
      if (referenced.has(entry.key)) {
        summary.referenced++;
        continue;
      }
      if (deps.dryRun || (await deps.media.remove(entry.key, cutoff))) {
        summary.removed++;
        summary.removedBytes += entry.size;
      }
    }
    candidates = [];
  };
  for await (const entry of deps.media.list()) {
    summary.scanned++;
    deps.onProgress?.(summary.scanned);
    if (entry.storedAt >= cutoff) {
      summary.young++;
      continue;
    }
    candidates.push(entry);
    if (candidates.length >= REFERENCE_BATCH) await judge();
  }
  await judge();
  return summary;
}

/** How long an Idempotency-Key's answer is replayed (CONTRACT "Writes"): older records are purged. */
const IDEMPOTENCY_WINDOW_HOURS = 24;
const PURGE_BATCH = 5_000;

/**
 * Deletes the idempotency records older than 24 hours (each holds a whole response, article bodies
 * included), in batches of a few thousand rows so that no single statement holds many locks. A key's
 * answer is no longer replayed after 24 hours anyway (infra/idempotency.ts); younger records stay.
 */
export async function purgeIdempotency(deps: { db: Db; now: () => Date }): Promise<{ purged: number }> {
  const cutoff = new Date(deps.now().getTime() - IDEMPOTENCY_WINDOW_HOURS * HOUR_MS);
  let purged = 0;
  for (;;) {
    const result = await deps.db
      .deleteFrom('idempotency_keys')
      .where((eb) =>
        eb(
          eb.refTuple('account_id', 'key'),
          'in',
          eb
            .selectFrom('idempotency_keys')
            .select(['account_id', 'key'])
            .where('created_at', '<', cutoff)
            .limit(PURGE_BATCH)
            .$asTuple('account_id', 'key'),
        ),
      )
      .executeTakeFirst();
    const n = Number(result.numDeletedRows);
    purged += n;
    if (n < PURGE_BATCH) return { purged };
  }
}

/** How long a registered OAuth client that was never allowed by anyone is kept. */
export const UNUSED_OAUTH_CLIENT_DAYS = 30;

/**
 * Removes the OAuth clients registered (dynamic client registration) more than `unusedDays` (30) ago
 * that nobody ever connected: no grant was ever made for them (`oauth_grants` keeps every grant made,
 * revoked ones included) and no authorization is under way for them (a live interaction names them).
 * Clients known by a metadata document (an https client_id) are never stored, so never removed here.
 * One statement decides and deletes, so two runs at once remove each client once.
 */
export async function removeUnusedOAuthClients(deps: {
  db: Db;
  now: () => Date;
  unusedDays?: number;
}): Promise<{ removed: number }> {
  const at = deps.now();
  const cutoffSeconds =
    Math.floor(at.getTime() / 1000) - (deps.unusedDays ?? UNUSED_OAUTH_CLIENT_DAYS) * 86_400;
  const clientId = sql<string>`c.payload ->> 'client_id'`;
  const result = await deps.db
    .deleteFrom('oauth_models as c')
    .where('c.kind', '=', 'Client')
    .where(sql<boolean>`(c.payload ->> 'client_id_issued_at')::bigint < ${cutoffSeconds}`)
    .where((eb) =>
      eb.not(
        eb.exists(
          eb
            .selectFrom('oauth_grants as g')
            .select(sql<number>`1`.as('one'))
            .where('g.client_id', '=', clientId),
        ),
      ),
    )
    .where((eb) =>
      eb.not(
        eb.exists(
          eb
            .selectFrom('oauth_models as i')
            .select(sql<number>`1`.as('one'))
            .where('i.kind', '=', 'Interaction')
            .where(sql<string>`i.payload -> 'params' ->> 'client_id'`, '=', clientId)
            .where((w) => w.or([w('i.expires_at', 'is', null), w('i.expires_at', '>', at)])),
        ),
      ),
    )
    .executeTakeFirst();
  return { removed: Number(result.numDeletedRows) };
}

/**
 * How long a sign-in failure count is kept after its last failure (unless its lock lasts longer): as
 * long as the longest window of the sign-in throttle's policies (apps/server/web/throttle.ts, 15
 * minutes), after which the count would start again anyway.
 */
export const SIGN_IN_FAILURES_KEPT_MS = 15 * 60_000;

/**
 * How long an expired OAuth row is kept: a consumed authorization code stays a little, so that its
 * replay is recognised (and the grant it made revoked) rather than answered as an unknown code.
 */
export const EXPIRED_OAUTH_ROWS_KEPT_MS = HOUR_MS;

/**
 * How long an MCP session lives without a request carrying it or its stream open on a process
 * (apps/application/subscriptions.ts).
 */
export const MCP_SESSION_IDLE_MS = 24 * HOUR_MS;

/**
 * Deletes what sign-ins and connections leave behind once it is of no use: web sessions that have
 * ended, MCP sessions not seen for `MCP_SESSION_IDLE_MS` (with their subscriptions), sign-in failure counts older than the throttle's window and not locked any more, and OAuth
 * rows (tokens, codes, interactions, provider sessions, grants) expired more than an hour ago. Each
 * read honours expiry already; this only keeps the tables small. Plain deletes of what has expired:
 * two runs at once delete each row once.
 */
export async function purgeExpiredSessions(deps: { db: Db; now: () => Date }): Promise<{
  webSessions: number;
  signInFailures: number;
  oauthRows: number;
  mcpSessions: number;
}> {
  const at = deps.now();
  const sessions = await deps.db.deleteFrom('web_sessions').where('expires_at', '<=', at).executeTakeFirst();
  const failures = await deps.db
    .deleteFrom('sign_in_failures')
    .where('last_failed_at', '<', new Date(at.getTime() - SIGN_IN_FAILURES_KEPT_MS))
    .where((eb) => eb.or([eb('locked_until', 'is', null), eb('locked_until', '<', at)]))
    .executeTakeFirst();
  const oauth = await deps.db
    .deleteFrom('oauth_models')
    .where('expires_at', '<', new Date(at.getTime() - EXPIRED_OAUTH_ROWS_KEPT_MS))
    .executeTakeFirst();
  const mcp = await deps.db
    .deleteFrom('mcp_sessions')
    .where('last_seen_at', '<=', new Date(at.getTime() - MCP_SESSION_IDLE_MS))
    .executeTakeFirst();
  return {
    webSessions: Number(sessions.numDeletedRows),
    signInFailures: Number(failures.numDeletedRows),
    oauthRows: Number(oauth.numDeletedRows),
    mcpSessions: Number(mcp.numDeletedRows),
  };
}

/**
 * Moves the new entries of the search indexes' pending lists into the indexes proper
 * (`gin_clean_pending_list`), returning how many pending pages each had. An edit writes its words'
 * entries to the end of its GIN index's pending list (`fastupdate`: cheap for the edit), and every
 * search reads the whole list besides the index: 400 pages of a burst of edits made a search of a
 * rare word three times slower (docs/performance.md, "Search"). Left alone, the list is merged only
 * by the edit that finds it over `gin_pending_list_limit` (4 MB), in that edit's statement, or by a
 * vacuum (which the embedded engine never runs on its own). Two runs at once merge each entry once:
 * the second waits for the first and finds little left.
 */
export async function mergeSearchPending(deps: { db: Db }): Promise<{ titles: number; bodies: number }> {
  const { rows } = await sql<{ titles: string; bodies: string }>`
    select gin_clean_pending_list('article_title_search_search'::regclass) as titles,
           gin_clean_pending_list('article_bodies_search'::regclass) as bodies`.execute(deps.db);
  const [merged] = rows;
  return { titles: Number(merged?.titles ?? 0), bodies: Number(merged?.bodies ?? 0) };
}
