import { hash as argon2Hash } from '@node-rs/argon2';
import { sql, type Transaction } from 'kysely';
import {
  decideAccount,
  decideStaff,
  evolveAccount,
  evolveStaff,
  initialAccountState,
  initialStaffState,
} from '../../domain/account/decider.ts';
import { accountStream, type KeyScope, staffStream } from '../../domain/account/events.ts';
import {
  activityStream,
  type CallRecorded,
  type StaffSearched,
  staffSearchStream,
} from '../../domain/activity/events.ts';
import {
  type Article,
  type ArticleCommand,
  type ArticleState,
  decide,
  evolve,
  initialState,
} from '../../domain/article/decider.ts';
import {
  type ArticleEvent,
  type ArticleStatus,
  articleStream,
  type FeaturedImage,
} from '../../domain/article/events.ts';
import { decideBacklink, evolveBacklink, initialBacklinkState } from '../../domain/backlink/decider.ts';
import { type BacklinkAcquired, backlinkStream } from '../../domain/backlink/events.ts';
import { DomainError } from '../../domain/errors.ts';
import type { Actor, EventMetadata, Origin } from '../../domain/event.ts';
import type { DomainEvent } from '../../domain/events.ts';
import type { HtmlMemory } from '../../domain/html/memory.ts';
import type { SanitizedItem } from '../../domain/html/sanitized-item.ts';
import { decideReport, evolveReport, initialReportState } from '../../domain/report/decider.ts';
import { type MonthlyReportReady, reportStream } from '../../domain/report/events.ts';
import { decideSite, evolveSite, initialSiteState } from '../../domain/site/decider.ts';
import { siteStream } from '../../domain/site/events.ts';
import { createBatcher } from '../../infra/batcher.ts';
import type { Database, Db } from '../../infra/db/schema.ts';
import {
  ConcurrencyError,
  type EventStore,
  type ExpectedVersion,
  type StoredEvent,
} from '../../infra/event-store.ts';
import { newApiKey, newId } from '../../infra/ids.ts';
import { readArticleSnapshot, type SnapshotMemory } from '../../projections/article-snapshots.ts';
import { type ArticleDetailRow, detailOf } from '../../projections/articles.ts';

/**
 * Who asks, from which face, and why: every revision carries it. `keep`, for an article change: what
 * is written with the change's events or not at all, given the answer the change will have (the
 * answer an idempotent retry replays: apps/application/article-write.ts).
 */
type Caller = {
  origin: Origin;
  actor: Actor;
  requestId?: string | undefined;
  keep?: KeepAnswer | undefined;
};

/** Writes to commit with an article change's events, given the answer the change will have. */
export type KeepAnswer = (result: EditResult) => (trx: Transaction<Database>) => Promise<void>;

export type EditResult = {
  article: ArticleDetailRow;
  changed: boolean;
  revision: number;
  sanitized: SanitizedItem[];
};

type CommandDeps = {
  db: Db;
  store: EventStore;
  /** The clock is injected so tests and replays are deterministic. */
  now?: () => Date;
  /** Sanitises a body ahead of its command, off this thread (infra/sanitize-pool.ts); optional. */
  sanitizeAhead?: (body: string) => Promise<void>;
  /** The runtime's snapshot memory, shared with its snapshot projector (projections/article-snapshots.ts). */
  snapshots: SnapshotMemory;
  /** What the html rules remember, passed to the article decider (the runtime's, shared with its pool and projectors). */
  html?: HtmlMemory;
};

/** How many times a command is decided again after losing a race for its stream. */
const MAX_ATTEMPTS = 10;

/**
 * Load the stream, fold it, decide, append at the version that was read. On a concurrent write,
 * load and decide again (the decision may now be different: a stale If-Match is refused, an edit
 * without one applies on top of the winner), after a short random pause, up to MAX_ATTEMPTS times.
 */
/**
 * Where a fold starts: a snapshot of the state at a version (the initial state at 0), and the
 * stream's version when the snapshot's read knows it (equal: no event to read after it).
 */
/** Writes committed with a command's events or not at all (see EventStore.append). */
type Alongside = (trx: Transaction<Database>) => Promise<void>;

/** Stores a credential (password hash or key hash) in the append's transaction: never in an event. */
function storeCredential(
  holderId: string,
  kind: 'password' | 'api_key',
  secret: string,
  at: Date,
): (trx: Transaction<Database>) => Promise<void> {
  return async (trx) => {
    await trx
      .insertInto('credentials')
      .values({ holder_id: holderId, kind, secret, updated_at: at })
      .onConflict((oc) => oc.columns(['holder_id', 'kind']).doUpdateSet({ secret, updated_at: at }))
      .execute();
  };
}

/** The shortest password the service accepts (web page and CLI alike). */
export const PASSWORD_MIN_LENGTH = 12;
/** The longest: argon2 hashes anything, but a megabyte of password is no password. */
export const PASSWORD_MAX_LENGTH = 1024;

function checkPassword(password: string): void {
  if (password.length < PASSWORD_MIN_LENGTH) {
    throw new DomainError(
      'invalid_request',
      `The password must be at least ${PASSWORD_MIN_LENGTH} characters long`,
    );
  }
  if (password.length > PASSWORD_MAX_LENGTH) {
    throw new DomainError(
      'invalid_request',
      `The password must be at most ${PASSWORD_MAX_LENGTH} characters long`,
    );
  }
}

type StartFrom<S> = () => Promise<{ state: S; version: number; streamVersion?: number } | undefined>;

async function handle<S, E extends DomainEvent>(
  store: EventStore,
  streamId: string,
  fold: { initial: S; evolve: (state: S, event: E) => S },
  decideOn: (state: S, version: number) => E[],
  snapshot?: StartFrom<S>,
  alongside?: Alongside,
): Promise<{ events: StoredEvent<E>[]; state: S; version: number }> {
  for (let attempt = 0; ; attempt++) {
    const start = (await snapshot?.()) ?? { state: fold.initial, version: 0 };
    const history =
      start.streamVersion === start.version
        ? []
        : await store.readStream<E>(streamId, { from: start.version + 1 });
    const state = history.reduce((s, e) => fold.evolve(s, e), start.state);
    const version =
      history.length === 0 ? start.version : (history[history.length - 1]?.version ?? start.version);
    const events = decideOn(state, version);
    if (events.length === 0) return { events: [], state, version };
    const expectedVersion: ExpectedVersion = version === 0 ? 'no_stream' : version;
    try {
      const result = await store.append(streamId, events, {
        expectedVersion,
        ...(alongside ? { alongside } : {}),
      });
      const after = events.reduce(fold.evolve, state);
      return { events: result.events, state: after, version: result.nextVersion };
    } catch (error) {
      if (error instanceof ConcurrencyError && attempt + 1 < MAX_ATTEMPTS) {
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 5 * (attempt + 1)));
        continue;
      }
      if (error instanceof ConcurrencyError) {
        throw new DomainError(
          'conflict',
          'The resource was changed by another request at the same time; try again',
        );
      }
      throw error;
    }
  }
}

/**
 * Runs work for one key at a time in this process, in arrival order: concurrent commands on one
 * stream queue here instead of racing to the database and retrying. Across processes the expected
 * version still decides.
 */
function keyedQueue(): <T>(key: string, work: () => Promise<T>) => Promise<T> {
  const tails = new Map<string, Promise<unknown>>();
  return async (key, work) => {
    const before = tails.get(key) ?? Promise.resolve();
    const mine = before.then(work, work);
    const tail = mine.catch(() => undefined);
    tails.set(key, tail);
    try {
      return await mine;
    } finally {
      if (tails.get(key) === tail) tails.delete(key);
    }
  };
}

const articleFold = { initial: initialState, evolve };
const accountFold = { initial: initialAccountState, evolve: evolveAccount };
const staffFold = { initial: initialStaffState, evolve: evolveStaff };
const siteFold = { initial: initialSiteState, evolve: evolveSite };
const backlinkFold = { initial: initialBacklinkState, evolve: evolveBacklink };
const reportFold = { initial: initialReportState, evolve: evolveReport };

export type Commands = ReturnType<typeof createCommands>;

/** The command handlers: the API, MCP, the web editor, the CLI and ingestion all call these. */
export function createCommands(deps: CommandDeps) {
  const { db, store } = deps;
  const queue = keyedQueue();
  // Activity records are appended together, at most 100 ms after the first of them: under load one
  // append (a transaction of a few statements, the activity rows written by it) carries hundreds of
  // calls. The log is a moment behind the calls. Each account's records are one append; should one
  // fail, its records are appended one by one, so that a record the store refuses takes no other
  // record (of the account or of another) down with it: only its own call's promise rejects.
  // Their transactions commit without waiting for the WAL flush (synchronous_commit off, for them
  // only): a batch of many accounts is as many commits, and waiting for a disk flush each took longer
  // than the calls took to come (docs/reliability.md, soak). A database crash can lose the last
  // fraction of a second of records, as a killed server loses those still in this batcher; it never
  // loses or reorders a change, and a record never lands without the rest of its transaction.
  const asyncCommit = (trx: Transaction<Database>) =>
    sql`select set_config('synchronous_commit', 'off', true)`.execute(trx).then(() => undefined);
  const calls = createBatcher<CallRecorded>(
    async (events) => {
      const failures: unknown[] = events.map(() => null);
      const byAccount = Map.groupBy(
        events.map((event, index) => ({ event, index })),
        (e) => e.event.data.accountId,
      );
      for (const [accountId, group] of byAccount) {
        const stream = activityStream(accountId);
        try {
          await store.append(
            stream,
            group.map((e) => e.event),
            { expectedVersion: 'any', alongside: asyncCommit },
          );
        } catch {
          for (const { event, index } of group) {
            try {
              await store.append(stream, [event], { expectedVersion: 'any', alongside: asyncCommit });
            } catch (error) {
              failures[index] = error;
            }
          }
        }
      }
      return failures;
    },
    { maxItems: 1000, maxDelayMs: 100 },
  );
  const run = <S, E extends DomainEvent>(
    streamId: string,
    fold: { initial: S; evolve: (state: S, event: E) => S },
    decideOn: (state: S, version: number) => E[],
    snapshot?: StartFrom<S>,
    alongside?: Alongside,
  ): Promise<{ events: StoredEvent<E>[]; state: S; version: number }> =>
    queue(streamId, () => handle(store, streamId, fold, decideOn, snapshot, alongside));
  const now = deps.now ?? (() => new Date());
  const meta = (caller?: { requestId?: string | undefined }): EventMetadata => ({
    at: now().toISOString(),
    ...(caller?.requestId ? { requestId: caller.requestId } : {}),
  });

  async function articleCommand(
    accountId: string,
    articleId: string,
    build: (state: Article) => ArticleCommand,
    caller?: Caller,
  ): Promise<EditResult> {
    let sanitized: SanitizedItem[] = [];
    /** The answer the decided events will give once appended: what `caller.keep` writes with them. */
    let answer: EditResult | undefined;
    const keep = caller?.keep;
    const result = await run(
      articleStream(articleId),
      articleFold,
      (state) => {
        // Another account's article is answered exactly like one that does not exist.
        if (!state.exists || state.accountId !== accountId)
          throw new DomainError('not_found', `No article ${articleId}`);
        const events = decide(build(state), state, deps.html);
        const edited = events.find((e) => e.type === 'ArticleEdited');
        sanitized = edited?.type === 'ArticleEdited' ? edited.data.sanitized : [];
        if (keep)
          answer = editResult(
            articleId,
            events.reduce(articleFold.evolve, state),
            events.length > 0,
            sanitized,
          );
        return events;
      },
      () => readArticleSnapshot(db, articleId, deps.snapshots),
      keep
        ? (trx) => {
            if (!answer) throw new Error('an article change is appended before it is decided');
            return keep(answer)(trx);
          }
        : undefined,
    );
    // The answer is the article as this command left it (what a read of its row gives once projected,
    // which happened in the append's transaction), not whatever a later edit made of it meanwhile.
    return editResult(articleId, result.state, result.events.length > 0, sanitized);
  }

  function editResult(
    articleId: string,
    state: ArticleState,
    changed: boolean,
    sanitized: SanitizedItem[],
  ): EditResult {
    if (!state.exists) throw new DomainError('not_found', `No article ${articleId}`);
    const article = detailOf(state, deps.html);
    return { article, changed, revision: article.revision, sanitized };
  }

  return {
    async openAccount(input: {
      name: string;
      email: string;
      password?: string | null;
    }): Promise<{ accountId: string }> {
      const accountId = newId('acc');
      const passwordHash = input.password ? await argon2Hash(input.password) : null;
      await run(
        accountStream(accountId),
        accountFold,
        (state) =>
          decideAccount(
            {
              type: 'OpenAccount',
              data: { accountId, name: input.name, email: input.email, withPassword: passwordHash !== null },
              metadata: meta(),
            },
            state,
          ),
        undefined,
        passwordHash === null ? undefined : storeCredential(accountId, 'password', passwordHash, now()),
      );
      return { accountId };
    },

    /**
     * Replaces an account holder's password: the new hash in `credentials` and a `PasswordChanged` event
     * (no secret) in one transaction, which also ends every web session of the account (the browser
     * that changed it is given a new one by the web page).
     */
    async changeAccountPassword(
      accountId: string,
      password: string,
      opts: { by: 'holder' | 'operator' },
    ): Promise<void> {
      checkPassword(password);
      const passwordHash = await argon2Hash(password);
      const store = storeCredential(accountId, 'password', passwordHash, now());
      await run(
        accountStream(accountId),
        accountFold,
        (state) =>
          decideAccount(
            { type: 'ChangeAccountPassword', data: { accountId, by: opts.by }, metadata: meta() },
            state,
          ),
        undefined,
        async (trx) => {
          await store(trx);
          await trx.deleteFrom('web_sessions').where('account_id', '=', accountId).execute();
        },
      );
    },

    async createApiKey(
      accountId: string,
      input: { name: string; scope: KeyScope },
    ): Promise<{ keyId: string; key: string; prefix: string; scope: KeyScope }> {
      const keyId = newId('key');
      const { key, prefix, hash } = newApiKey();
      await run(
        accountStream(accountId),
        accountFold,
        (state) =>
          decideAccount(
            {
              type: 'CreateApiKey',
              data: { accountId, keyId, name: input.name, prefix, scope: input.scope },
              metadata: meta(),
            },
            state,
          ),
        undefined,
        storeCredential(keyId, 'api_key', hash, now()),
      );
      return { keyId, key, prefix, scope: input.scope };
    },

    async revokeApiKey(accountId: string, keyId: string): Promise<{ revoked: boolean }> {
      const result = await run(accountStream(accountId), accountFold, (state) =>
        decideAccount({ type: 'RevokeApiKey', data: { accountId, keyId }, metadata: meta() }, state),
      );
      return { revoked: result.events.length > 0 };
    },

    async addStaffMember(input: {
      name: string;
      email: string;
      password?: string | null;
    }): Promise<{ staffId: string }> {
      const staffId = newId('stf');
      const passwordHash = input.password ? await argon2Hash(input.password) : null;
      await run(
        staffStream(staffId),
        staffFold,
        (state) =>
          decideStaff(
            {
              type: 'AddStaffMember',
              data: { staffId, name: input.name, email: input.email, withPassword: passwordHash !== null },
              metadata: meta(),
            },
            state,
          ),
        undefined,
        passwordHash === null ? undefined : storeCredential(staffId, 'password', passwordHash, now()),
      );
      return { staffId };
    },

    /** Replaces a support staff member's password (CLI only: staff have no web pages yet). */
    async changeStaffPassword(staffId: string, password: string): Promise<void> {
      checkPassword(password);
      const passwordHash = await argon2Hash(password);
      await run(
        staffStream(staffId),
        staffFold,
        (state) => decideStaff({ type: 'ChangeStaffPassword', data: { staffId }, metadata: meta() }, state),
        undefined,
        storeCredential(staffId, 'password', passwordHash, now()),
      );
    },

    async addSite(
      accountId: string,
      input: { siteId?: string; name: string; domain: string; url: string },
    ): Promise<{ siteId: string }> {
      const account = await store.readStream(accountStream(accountId), { to: 1 });
      if (account.length === 0) throw new DomainError('not_found', `No account ${accountId}`);
      const siteId = input.siteId ?? newId('site');
      const { name, domain, url } = input;
      await run(siteStream(siteId), siteFold, (state) =>
        decideSite(
          { type: 'AddSite', data: { siteId, accountId, name, domain, url }, metadata: meta() },
          state,
        ),
      );
      return { siteId };
    },

    async acquireBacklink(
      accountId: string,
      input: Omit<BacklinkAcquired['data'], 'accountId' | 'backlinkId'> & { backlinkId?: string },
    ): Promise<{ backlinkId: string }> {
      await requireSite(accountId, input.siteId);
      const backlinkId = input.backlinkId ?? newId('bl');
      await run(backlinkStream(backlinkId), backlinkFold, (state) =>
        decideBacklink(
          { type: 'AcquireBacklink', data: { ...input, backlinkId, accountId }, metadata: meta() },
          state,
        ),
      );
      return { backlinkId };
    },

    async createArticle(
      accountId: string,
      input: {
        articleId?: string;
        siteId: string;
        title: string;
        body: string;
        url: string;
        status: ArticleStatus;
        publishedAt: string | null;
        targetKeyword: string | null;
        featuredImage: FeaturedImage | null;
        reason?: string | null;
      },
      caller: Caller,
    ): Promise<{ articleId: string }> {
      await Promise.all([requireSite(accountId, input.siteId), deps.sanitizeAhead?.(input.body)]);
      const articleId = input.articleId ?? newId('art');
      await run(articleStream(articleId), articleFold, (state) =>
        decide(
          {
            type: 'CreateArticle',
            data: {
              articleId,
              siteId: input.siteId,
              accountId,
              title: input.title,
              body: input.body,
              url: input.url,
              status: input.status,
              publishedAt: input.publishedAt,
              targetKeyword: input.targetKeyword,
              featuredImage: input.featuredImage,
              origin: caller.origin,
              actor: caller.actor,
              reason: input.reason ?? null,
            },
            metadata: meta(caller),
          },
          state,
          deps.html,
        ),
      );
      return { articleId };
    },

    async editArticle(
      accountId: string,
      articleId: string,
      input: {
        title?: string | undefined;
        body?: string | undefined;
        reason?: string | null | undefined;
        expectedRevision?: number | undefined;
      },
      caller: Caller,
    ): Promise<EditResult> {
      if (input.body !== undefined) await deps.sanitizeAhead?.(input.body);
      return articleCommand(
        accountId,
        articleId,
        () => ({
          type: 'EditArticle',
          data: {
            articleId,
            title: input.title,
            body: input.body,
            reason: input.reason ?? null,
            expectedRevision: input.expectedRevision,
            origin: caller.origin,
            actor: caller.actor,
          },
          metadata: meta(caller),
        }),
        caller,
      );
    },

    replaceFeaturedImage(
      accountId: string,
      articleId: string,
      input: {
        featuredImage: FeaturedImage;
        reason?: string | null | undefined;
        expectedRevision?: number | undefined;
      },
      caller: Caller,
    ): Promise<EditResult> {
      return articleCommand(
        accountId,
        articleId,
        () => ({
          type: 'ReplaceFeaturedImage',
          data: {
            articleId,
            featuredImage: input.featuredImage,
            reason: input.reason ?? null,
            expectedRevision: input.expectedRevision,
            origin: caller.origin,
            actor: caller.actor,
          },
          metadata: meta(caller),
        }),
        caller,
      );
    },

    async restoreRevision(
      accountId: string,
      articleId: string,
      input: { revision: number; reason?: string | null | undefined; expectedRevision?: number | undefined },
      caller: Caller,
    ): Promise<EditResult> {
      const snapshot = await articleAt(accountId, articleId, input.revision);
      return articleCommand(
        accountId,
        articleId,
        () => ({
          type: 'RestoreRevision',
          data: {
            articleId,
            revision: input.revision,
            snapshot,
            reason: input.reason ?? null,
            expectedRevision: input.expectedRevision,
            origin: caller.origin,
            actor: caller.actor,
          },
          metadata: meta(caller),
        }),
        caller,
      );
    },

    changeArticleStatus(
      accountId: string,
      articleId: string,
      /** `publishedAt` left out keeps the article's current one. */
      input: {
        status: ArticleStatus;
        publishedAt?: string | null | undefined;
        reason?: string | null | undefined;
        expectedRevision?: number | undefined;
      },
      caller: Caller,
    ): Promise<EditResult> {
      return articleCommand(accountId, articleId, (state) => ({
        type: 'ChangeArticleStatus',
        data: {
          articleId,
          status: input.status,
          publishedAt: input.publishedAt !== undefined ? input.publishedAt : state.publishedAt,
          reason: input.reason ?? null,
          expectedRevision: input.expectedRevision,
          origin: caller.origin,
          actor: caller.actor,
        },
        metadata: meta(caller),
      }));
    },

    /**
     * Records a site's report of a month in its own stream (`reportStream`), once: when the report
     * exists already (made by an earlier run, or by another process just now) nothing is appended and
     * `made` is false.
     */
    async makeMonthlyReport(data: MonthlyReportReady['data']): Promise<{ made: boolean }> {
      const result = await run(reportStream(data.siteId, data.period), reportFold, (state) =>
        decideReport({ type: 'MakeMonthlyReport', data, metadata: meta() }, state),
      );
      return { made: result.events.length > 0 };
    },

    /** The article as it was at revision n, by replaying its stream up to n. */
    articleAt,

    /** Records a support staff member's search in the staff-side audit (`StaffSearched`). */
    async recordStaffSearch(data: Omit<StaffSearched['data'], 'searchId'>): Promise<{ searchId: string }> {
      const searchId = newId('srch');
      await store.append(
        staffSearchStream(data.staff.id),
        [
          {
            type: 'StaffSearched',
            data: { searchId, ...data },
            metadata: meta({ requestId: data.requestId ?? undefined }),
          },
        ],
        { expectedVersion: 'any' },
      );
      return { searchId };
    },

    /** Stores the calls recorded so far now, without waiting for their batch's delay. */
    flushCalls: (): Promise<void> => calls.flushNow(),

    /**
     * One call through a face of the service, for the activity log. Calls are appended in batches
     * (one append per account every few milliseconds): an account's calls share one stream, and one
     * append per call would make every request of the account queue on that stream's row. The promise
     * resolves once the record is stored.
     */
    async recordCall(
      input: Omit<CallRecorded['data'], 'activityId' | 'revision' | 'clientRequestId'> & {
        revision?: number | null;
        /** The client's own X-Request-Id (validated by the face); none by default. */
        clientRequestId?: string | null;
        at?: Date;
      },
    ): Promise<{ activityId: string }> {
      // Field by field rather than spread: this runs on every call.
      const activityId = newId('act');
      const at = (input.at ?? now()).toISOString();
      const data: CallRecorded['data'] = {
        activityId,
        accountId: input.accountId,
        source: input.source,
        actor: input.actor,
        operation: input.operation,
        siteId: input.siteId,
        articleId: input.articleId,
        status: input.status,
        requestId: input.requestId,
        clientRequestId: input.clientRequestId ?? null,
        durationMs: input.durationMs,
      };
      // Only a call that created a revision names one: the others' records keep their shape.
      if (typeof input.revision === 'number') data.revision = input.revision;
      await calls.add({
        type: 'CallRecorded',
        data,
        metadata: input.requestId ? { at, requestId: input.requestId } : { at },
      });
      return { activityId };
    },
  };

  async function articleAt(accountId: string, articleId: string, revision: number): Promise<ArticleState> {
    const missing = new DomainError('not_found', `Article ${articleId} has no revision ${revision}`);
    if (!Number.isInteger(revision) || revision < 1) throw missing;
    // Each body-carrying event replaces the body whole: only the last one's is read.
    const events = await store.readStream<ArticleEvent>(articleStream(articleId), {
      to: revision,
      onlyLast: 'body',
    });
    const state = events.reduce((s, e) => evolve(s, e), initialState);
    if (!state.exists || state.accountId !== accountId)
      throw new DomainError('not_found', `No article ${articleId}`);
    if (state.revision !== revision) {
      throw missing;
    }
    return state;
  }

  async function requireSite(accountId: string, siteId: string): Promise<void> {
    const site = await store.readStream(siteStream(siteId), { to: 1 });
    const added = site[0]?.data as { accountId?: string } | undefined;
    if (!added || added.accountId !== accountId) throw new DomainError('not_found', `No site ${siteId}`);
  }
}
