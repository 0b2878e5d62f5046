import { type Expression, type RawBuilder, type SqlBool, sql } from 'kysely';
import { type CommitGroup, createCommitGroup } from '../commit-group.ts';
import type { Db } from '../db/schema.ts';
import { ALWAYS_NAMED } from '../db/statement-cache.ts';
import {
  IN_TRANSACTION,
  type InTransaction,
  inStatement,
  type Pending,
  type Project,
  type Statement,
} from '../projection.ts';
import { detached } from '../telemetry/spans.ts';
import { appendQueries, type Claim, eventRecord, type InsertedRow } from './append.ts';
import type { NewEvent } from './types.ts';

/*
 * Group commit of appends (infra/commit-group.ts decides which go together): the SQL of a group's
 * one statement, and how each member is answered from it, or sent again alone.
 */

/** Group commit: at most this many group statements at once, each of at most this many appends. */
const GROUPS_IN_FLIGHT = 2;
const GROUP_APPENDS = 8;

/** The commit group of a store's appends (see sendGroup). */
export function createAppendGroup(db: Db, grouped: Project<NewEvent> | undefined): CommitGroup<GroupMember> {
  return createCommitGroup<GroupMember>({
    maxInFlight: GROUPS_IN_FLIGHT,
    maxItems: GROUP_APPENDS,
    send: (members) => sendGroup(db, members, grouped),
  });
}

/**
 * One statement of several appends to different streams (group commit), each with its own WITH
 * queries (`_1`, `_2`... after their names) and its inline projectors' statements (made with its own
 * `appended_N`): each claims its own version, and one whose claim fails inserts and changes nothing,
 * as alone. The rows say which append inserted them (`member`, from 1).
 */
function groupStatement(
  members: readonly { claim: Claim; statements: readonly Statement[] }[],
): RawBuilder<InsertedRow & { member: number }> {
  const queries = members.map((m, index) => appendQueries(`_${index + 1}`, m.claim, m.statements));
  const selects = members.map(
    (_, index) =>
      sql`select ${sql.raw(String(index + 1))}::integer as member, event_id, position, transaction_id, version, recorded_at from ${sql.raw(`appended_${index + 1}`)}`,
  );
  // Few texts (one per number of appends and their shapes), each over the usual limit: named anyway.
  return sql`${sql.raw(ALWAYS_NAMED)}
    with ${sql.join(queries, sql`, `)}
    ${sql.join(selects, sql` union all `)}`;
}

/** One append waiting in the commit group: what it claims, and how it is answered. */
export type GroupMember = {
  claim: Claim;
  /** Names its precondition (the same check, the same name); none without one. */
  preconditionId: string | undefined;
  /** Its events with their versions (the expected version plus one, on): what the inline projections see. */
  pending: readonly Pending<NewEvent>[];
  /** Appends of one shape make statements of one text: only they go together (see sendGroup). */
  shape: string;
  /** Its inline projectors' statements, made with its place's `appended`; IN_TRANSACTION: it goes alone. */
  statements: (appended: Expression<SqlBool>) => readonly Statement[] | InTransaction;
  /** Answers it from the rows the group's statement inserted for it (none: refused, or a conflict). */
  inserted: (rows: readonly InsertedRow[]) => Promise<unknown>;
  /** Sends it on its own, and answers it. */
  alone: () => Promise<unknown>;
};

/**
 * Sends appends of different streams together: one statement, so one transaction and one commit
 * (one WAL flush) for each group of appends of one shape. Appends of one shape make one text for each
 * number of them, which PostgreSQL keeps prepared (infra/db/statement-cache.ts): few texts, however
 * mixed the appends. An append whose projectors need a transaction, or the only one of its shape, goes
 * alone; should a group's statement fail (a constraint one append broke, a deadlock with another
 * process), nothing of it was written, and each goes again alone, failing or not on its own. Streams
 * in id order, so that the statements of several processes lock them in the same order. Every member
 * is answered; the statement belongs to no caller's trace.
 */
async function sendGroup(
  db: Db,
  members: readonly GroupMember[],
  grouped: Project<NewEvent> | undefined,
): Promise<void> {
  const sorted = [...members].sort((a, b) => compareIds(a.claim.streamId, b.claim.streamId));
  await Promise.all(
    [...Map.groupBy(sorted, (member) => member.shape).values()].map((same) => sendShape(db, same, grouped)),
  );
}

/** Appends of one shape, in stream id order: as one statement (see sendGroup). */
async function sendShape(
  db: Db,
  members: readonly GroupMember[],
  grouped: Project<NewEvent> | undefined,
): Promise<void> {
  const settable = grouped === undefined ? [] : settableOf(members);
  const statements =
    grouped !== undefined && settable.length > 1 ? setStatements(settable, grouped) : IN_TRANSACTION;
  if (statements === IN_TRANSACTION) return sendEach(db, members);
  await Promise.all([
    sendSet(db, settable, statements),
    sendEach(
      db,
      members.filter((member) => !settable.includes(member)),
    ),
  ]);
}

/** A group's appends to existing streams at their versions, as one set statement (see setGroupStatement). */
async function sendSet(
  db: Db,
  members: readonly GroupMember[],
  statements: readonly Statement[],
): Promise<void> {
  let inserted: (InsertedRow & { stream_id: string })[] | undefined;
  try {
    inserted = (await detached(() => setGroupStatement(members, statements).execute(db))).rows;
  } catch {
    await Promise.all(members.map((member) => member.alone()));
    return;
  }
  const byStream = Map.groupBy(inserted, (row) => row.stream_id);
  await Promise.all(members.map((member) => member.inserted(byStream.get(member.claim.streamId) ?? [])));
}

/** Appends of one shape, each with its own statements, as one statement (groupStatement), or alone. */
async function sendEach(db: Db, members: readonly GroupMember[]): Promise<void> {
  const [first] = members;
  if (first === undefined) return;
  if (members.length === 1) {
    await first.alone();
    return;
  }
  const together: { member: GroupMember; claim: Claim; statements: readonly Statement[] }[] = [];
  const apart: Promise<unknown>[] = [];
  for (const member of members) {
    const appended = sql<SqlBool>`exists (select from ${sql.raw(`appended_${together.length + 1}`)})`;
    let statements: readonly Statement[] | InTransaction;
    try {
      statements = member.statements(appended);
    } catch {
      statements = IN_TRANSACTION;
    }
    if (statements === IN_TRANSACTION) apart.push(member.alone());
    else together.push({ member, claim: member.claim, statements });
  }
  const [sole] = together;
  if (sole !== undefined && together.length === 1) apart.push(sole.member.alone());
  else if (together.length > 1) {
    let inserted: (InsertedRow & { member: number })[] | undefined;
    try {
      inserted = (await detached(() => groupStatement(together).execute(db))).rows;
    } catch {
      apart.push(...together.map((t) => t.member.alone()));
    }
    if (inserted !== undefined) {
      const byMember = Map.groupBy(inserted, (row) => row.member);
      apart.push(...together.map((t, index) => t.member.inserted(byMember.get(index + 1) ?? [])));
    }
  }
  await Promise.all(apart);
}

/**
 * The inline projections of a group's settable appends (settableOf), their events as one batch, as
 * statements that need not grow with it, each changing a stream's rows only where its claim
 * succeeded; else IN_TRANSACTION (each append brings its own statements: groupStatement).
 */
function setStatements(
  members: readonly GroupMember[],
  grouped: Project<NewEvent>,
): readonly Statement[] | InTransaction {
  try {
    return inStatement(
      grouped(
        members.flatMap((member) => member.pending),
        { appended: (stream) => sql<SqlBool>`${stream} in ${APPENDED_STREAMS}` },
      ),
    );
  } catch {
    return IN_TRANSACTION;
  }
}

/**
 * The appends a set statement can carry: those that claim a version of a stream that exists (`update
 * streams`), one per stream (a second append to a stream of the group goes with the others).
 */
function settableOf(members: readonly GroupMember[]): GroupMember[] {
  const streams = new Set<string>();
  return members.filter(({ claim }) => {
    if (typeof claim.expectedVersion !== 'number' || claim.expectedVersion < 1) return false;
    if (streams.has(claim.streamId)) return false;
    streams.add(claim.streamId);
    return true;
  });
}

/** The streams whose version claim succeeded, in a group's set statement (see setGroupStatement). */
const APPENDED_STREAMS = sql`(select stream_id from appended)`;

/**
 * A group of appends, each to its own existing stream at its expected version, as one statement whose
 * parts do not grow with the group: one version claim of every stream (the claims one JSON parameter),
 * one insert of every event (one JSON parameter), and the inline projections' group statements, each
 * changing only the rows of streams whose claim succeeded. One whose claim fails (a conflict, its
 * precondition refused) inserts and changes nothing, as alone. Preconditions named alike are one
 * condition; different ones are checked each for its own append. The rows say which stream they are
 * of (an append is of one stream, and no two of the group share one).
 */
function setGroupStatement(
  members: readonly GroupMember[],
  statements: readonly Statement[],
): RawBuilder<InsertedRow & { stream_id: string }> {
  const claims = JSON.stringify(
    members.map(({ claim }, index) => ({
      member: index + 1,
      stream_id: claim.streamId,
      expected: claim.expectedVersion,
      count: claim.rows.length,
    })),
  );
  const events = `[${members
    .flatMap(({ claim }, index) =>
      claim.rows.map((row, n) => eventRecord(row, n + 1, `"member":${index + 1},`)),
    )
    .join(',')}]`;
  const projections = statements.map(
    (statement, index) => sql`, ${sql.raw(`inline_${index}`)} as (${statement})`,
  );
  return sql`${sql.raw(ALWAYS_NAMED)}
    with claim as (
      update streams s set version = s.version + c.count, updated_at = now()
      from jsonb_to_recordset(${claims}::jsonb) as c (member integer, stream_id text, expected integer, count integer)
      where s.stream_id = c.stream_id and s.version = c.expected and ${preconditionsOf(members)}
      returning c.member, s.stream_id, s.version, c.count
    ),
    appended as (
      insert into events (event_id, stream_id, version, type, data, metadata)
      select r.event_id, c.stream_id, c.version - c.count + r.n, r.type, r.data, r.metadata
      from claim c join jsonb_to_recordset(${events}::jsonb) as r (member integer, event_id uuid, n integer, type text, data jsonb, metadata jsonb)
        on r.member = c.member
      order by c.member, r.n
      returning stream_id, event_id, position, transaction_id::text as transaction_id, version, recorded_at
    )${sql.join(projections, sql``)}
    select stream_id, event_id, position, transaction_id, version, recorded_at from appended`;
}

/** The members' preconditions as one condition on the claim's row `c` (its `member`, from 1). */
function preconditionsOf(members: readonly GroupMember[]): RawBuilder<SqlBool> {
  const [first] = members;
  if (members.every((member) => member.preconditionId === first?.preconditionId)) {
    return first?.claim.precondition ?? sql<SqlBool>`true`;
  }
  const cases = members.flatMap(({ claim }, index) =>
    claim.precondition === undefined
      ? []
      : [sql`when ${sql.raw(String(index + 1))} then (${claim.precondition})`],
  );
  return sql<SqlBool>`(case c.member ${sql.join(cases, sql` `)} else true end)`;
}

function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
