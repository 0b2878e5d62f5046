import { type AliasedRawBuilder, type Expression, type Selectable, type SqlBool, sql } from 'kysely';
import { DomainError } from '../domain/errors.ts';
import type { ApiKeysTable } from '../infra/db/read-model-tables.ts';
import type { ApiKeyUsageTable, Db } from '../infra/db/schema.ts';
import type { Precondition } from '../infra/event-store.ts';
import { eachEvent, type Pending, type Statement } from '../infra/projection.ts';
import { type EventOf, inlineProjector, unhandled } from './projector.ts';

type AccountsEvent = EventOf<'AccountOpened' | 'ApiKeyCreated' | 'ApiKeyRevoked' | 'StaffMemberAdded'>;

/** The row an event inserts or changes, when `when` holds; a replay changes nothing. */
function accountStatements(event: Pending<AccountsEvent>, when: Expression<SqlBool>): Statement[] {
  const at = event.metadata.at;
  switch (event.type) {
    case 'AccountOpened': {
      const d = event.data;
      return [
        sql`insert into accounts (id, name, email, created_at)
            select ${d.accountId}::text, ${d.name}::text, ${d.email}::text, ${at}::timestamptz
             where ${when}
            on conflict (id) do nothing`,
      ];
    }
    case 'ApiKeyCreated': {
      // The hash is the one written to `credentials` alongside the event, in the same transaction.
      const d = event.data;
      return [
        sql`insert into api_keys (id, account_id, name, prefix, hash, scope, created_at, revoked_at)
            select ${d.keyId}::text, ${d.accountId}::text, ${d.name}::text, ${d.prefix}::text,
                   (select secret from credentials where holder_id = ${d.keyId} and kind = 'api_key'),
                   ${d.scope}::text, ${at}::timestamptz, null
             where ${when}
            on conflict (id) do nothing`,
      ];
    }
    case 'ApiKeyRevoked':
      return [
        sql`update api_keys set revoked_at = ${at}::timestamptz
             where id = ${event.data.keyId} and revoked_at is null and ${when}`,
      ];
    case 'StaffMemberAdded': {
      const d = event.data;
      return [
        sql`insert into staff (id, email, name, created_at)
            select ${d.staffId}::text, ${d.email}::text, ${d.name}::text, ${at}::timestamptz
             where ${when}
            on conflict (id) do nothing`,
      ];
    }
    default:
      return unhandled('accounts', event);
  }
}

/**
 * Accounts, their API keys and support staff: inline, so a key works on the next request. No secret is
 * in an event: a key's hash is copied from `credentials` (written in the same transaction as its
 * ApiKeyCreated, and never dropped by a rebuild) into `api_keys.hash`, so the per-request lookup stays
 * one indexed read. Passwords are read from `credentials` at sign-in.
 */
export const accountsProjector = inlineProjector({
  name: 'accounts@1',
  mode: 'inline',
  handles: ['AccountOpened', 'ApiKeyCreated', 'ApiKeyRevoked', 'StaffMemberAdded'],
  tables: ['accounts', 'api_keys', 'staff'],
  project: eachEvent(accountStatements),
});

/** An API key as its lookups read it: without its hash, with when it was last used (null: never). */
export type ApiKeyRow = Omit<Selectable<ApiKeysTable>, 'hash'> & {
  last_used_at: Selectable<ApiKeyUsageTable>['last_used_at'] | null;
};

const keyColumns = [
  'k.id',
  'k.account_id',
  'k.name',
  'k.prefix',
  'k.scope',
  'k.created_at',
  'k.revoked_at',
  'u.last_used_at',
] as const;

export async function findApiKeyByHash(db: Db, hash: string): Promise<ApiKeyRow | undefined> {
  return db
    .selectFrom('api_keys as k')
    .leftJoin('api_key_usage as u', 'u.key_id', 'k.id')
    .select(keyColumns)
    .where('k.hash', '=', hash)
    .executeTakeFirst();
}

/** A key that is unknown or revoked: one answer for both, so that it tells a caller nothing of which. */
export function invalidKeyError(): DomainError {
  return new DomainError('unauthenticated', 'The API key is not valid (unknown or revoked)');
}

/** For an append: the key must still exist unrevoked, or the append writes nothing and is refused as unauthenticated. */
export function keyStillLive(keyId: string): Precondition {
  return {
    holds: sql<SqlBool>`exists (select 1 from api_keys where id = ${keyId} and revoked_at is null)`,
    refusal: invalidKeyError,
    id: `api key ${keyId} live`,
  };
}

/** Whether a key exists and is not revoked. */
export async function isKeyLive(db: Db, keyId: string): Promise<boolean> {
  const row = await db
    .selectFrom('api_keys')
    .select('id')
    .where('id', '=', keyId)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * Whether the key is not revoked, as a column of another statement: a read folds the check that
 * the key it is made with still works into its own statement. `true` when no key is given.
 */
export function keyLive(keyId: string | undefined): AliasedRawBuilder<boolean, 'key_live'> {
  if (keyId === undefined) return sql<boolean>`true`.as('key_live');
  return sql<boolean>`exists (select 1 from api_keys where id = ${keyId} and revoked_at is null)`.as(
    'key_live',
  );
}

export async function listApiKeys(db: Db, accountId: string): Promise<ApiKeyRow[]> {
  return db
    .selectFrom('api_keys as k')
    .leftJoin('api_key_usage as u', 'u.key_id', 'k.id')
    .select(keyColumns)
    .where('k.account_id', '=', accountId)
    .orderBy('k.created_at', 'desc')
    .orderBy('k.id', 'desc')
    .execute();
}

export async function findAccount(
  db: Db,
  accountId: string,
): Promise<{ id: string; name: string; email: string; created_at: Date } | undefined> {
  return db
    .selectFrom('accounts')
    .select(['id', 'name', 'email', 'created_at'])
    .where('id', '=', accountId)
    .executeTakeFirst();
}

/** The name and email of each of these accounts that exists, by id (a page's worth: support staff's audit). */
export async function accountNames(
  db: Db,
  accountIds: readonly string[],
): Promise<Map<string, { id: string; name: string; email: string }>> {
  if (accountIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('accounts')
    .select(['id', 'name', 'email'])
    .where('id', 'in', [...new Set(accountIds)])
    .execute();
  return new Map(rows.map((r) => [r.id, r]));
}

/**
 * Whether `error` is the refusal of a second account (`accounts_email`) or staff member
 * (`staff_email`) with an email another has, in any case: the unique index's, for two openings that
 * both found the email free before either was written.
 */
export function isEmailTaken(error: unknown, index: 'accounts_email' | 'staff_email'): boolean {
  const e = error as { code?: unknown; constraint?: unknown } | null;
  return e?.code === '23505' && e.constraint === index;
}

/** The account with this email (any case) and its password hash (from `credentials`; null: none set). */
export async function findAccountByEmail(
  db: Db,
  email: string,
): Promise<{ id: string; name: string; email: string; password_hash: string | null } | undefined> {
  return db
    .selectFrom('accounts as a')
    .leftJoin('credentials as c', (join) =>
      join.onRef('c.holder_id', '=', 'a.id').on('c.kind', '=', 'password'),
    )
    .select(['a.id', 'a.name', 'a.email', 'c.secret as password_hash'])
    .where((eb) => eb(eb.fn('lower', ['a.email']), '=', email.toLowerCase()))
    .executeTakeFirst();
}

/** An account holder's password hash, or null when none is set. */
export async function findPasswordHash(db: Db, holderId: string): Promise<string | null> {
  const row = await db
    .selectFrom('credentials')
    .select('secret')
    .where('holder_id', '=', holderId)
    .where('kind', '=', 'password')
    .executeTakeFirst();
  return row?.secret ?? null;
}

/** A support staff member by email (any case). */
export async function findStaffByEmail(
  db: Db,
  email: string,
): Promise<{ id: string; name: string; email: string; password_hash: string | null } | undefined> {
  return db
    .selectFrom('staff as s')
    .leftJoin('credentials as c', (join) =>
      join.onRef('c.holder_id', '=', 's.id').on('c.kind', '=', 'password'),
    )
    .select(['s.id', 's.name', 's.email', 'c.secret as password_hash'])
    .where((eb) => eb(eb.fn('lower', ['s.email']), '=', email.toLowerCase()))
    .executeTakeFirst();
}
