import { type AliasedRawBuilder, sql } from 'kysely';
import { DomainError } from '../domain/errors.ts';
import type { Db } from '../infra/db/schema.ts';
import type { Projector } from './projector.ts';

/**
 * Accounts, their API keys and support staff: inline, so a key works on the next request. No secret is
 * in an event: a key's hash is copied from `credentials` (written in the same transaction as its
 * ApiKeyCreated, and never dropped by a rebuild) into `api_keys.hash`, so the per-request lookup stays
 * one indexed read. Passwords are read from `credentials` at sign-in.
 */
export const accountsProjector: Projector = {
  name: 'accounts@1',
  mode: 'inline',
  handles: ['AccountOpened', 'ApiKeyCreated', 'ApiKeyRevoked', 'StaffMemberAdded'],
  tables: ['accounts', 'api_keys', 'staff'],
  async apply(event, trx) {
    const at = event.metadata.at;
    switch (event.type) {
      case 'AccountOpened': {
        const d = event.data;
        await trx
          .insertInto('accounts')
          .values({
            id: d.accountId,
            name: d.name,
            email: d.email,
            created_at: at,
          })
          .onConflict((oc) => oc.column('id').doNothing())
          .execute();
        return;
      }
      case 'ApiKeyCreated': {
        const d = event.data;
        await trx
          .insertInto('api_keys')
          .values({
            id: d.keyId,
            account_id: d.accountId,
            name: d.name,
            prefix: d.prefix,
            hash: (eb) =>
              eb
                .selectFrom('credentials')
                .select('secret')
                .where('holder_id', '=', d.keyId)
                .where('kind', '=', 'api_key'),
            scope: d.scope,
            created_at: at,
            revoked_at: null,
          })
          .onConflict((oc) => oc.column('id').doNothing())
          .execute();
        return;
      }
      case 'ApiKeyRevoked':
        await trx
          .updateTable('api_keys')
          .set({ revoked_at: at })
          .where('id', '=', event.data.keyId)
          .where('revoked_at', 'is', null)
          .execute();
        return;
      case 'StaffMemberAdded': {
        const d = event.data;
        await trx
          .insertInto('staff')
          .values({
            id: d.staffId,
            email: d.email,
            name: d.name,
            created_at: at,
          })
          .onConflict((oc) => oc.column('id').doNothing())
          .execute();
        return;
      }
      default:
        return;
    }
  },
};

export type ApiKeyRow = {
  id: string;
  account_id: string;
  name: string;
  prefix: string;
  scope: 'read' | 'write';
  created_at: Date;
  revoked_at: Date | null;
  last_used_at: Date | null;
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

/** The refusal of a key that was revoked (after the process had seen it unrevoked). */
/** A key that is unknown or revoked: one answer for both, so that it tells a caller nothing of which. */
export function invalidKeyError(): DomainError {
  return new DomainError('unauthenticated', 'The API key is not valid (unknown or revoked)');
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
): Promise<{ id: string; name: string; email: string } | undefined> {
  return db
    .selectFrom('staff')
    .select(['id', 'name', 'email'])
    .where((eb) => eb(eb.fn('lower', ['email']), '=', email.toLowerCase()))
    .executeTakeFirst();
}
