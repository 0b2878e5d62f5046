import { verify as argon2Verify } from '@node-rs/argon2';
import { sql } from 'kysely';
import { Migrator } from 'kysely/migration';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Runtime } from '../../apps/runtime.ts';
import { migrateToLatest } from '../../infra/db/migrate.ts';
import { migrationProvider } from '../../infra/db/migrations/index.ts';
import type { Db } from '../../infra/db/schema.ts';
import { hashApiKey } from '../../infra/ids.ts';
import { rebuild } from '../../infra/projection-runner.ts';
import { accountsProjector, findAccountByEmail, findApiKeyByHash } from '../../projections/accounts.ts';
import { backends, createTestDatabase } from '../support/db.ts';
import { createTestRuntime } from '../support/runtime.ts';

/*
 * Secrets live in `credentials`, never in the event log: accounts, keys and staff leave no hash in any
 * event; sign-in and key lookups read them; a rebuild keeps keys working; a password change is an
 * event without a secret that ends the account's other web sessions; migration 011 moves the hashes
 * out of events written before it.
 */

/** Every event's data as JSON text. */
async function eventData(db: Db): Promise<{ type: string; data: string }[]> {
  const { rows } = await sql<{ type: string; data: string }>`
    select type, data::text as data from events order by position`.execute(db);
  return rows;
}

function expectNoSecret(events: { type: string; data: string }[], secrets: string[]): void {
  for (const event of events) {
    for (const secret of secrets) expect(event.data, event.type).not.toContain(secret);
    expect(event.data, event.type).not.toMatch(/"(passwordHash|hash|password|secret)"/);
    expect(event.data, event.type).not.toContain('$argon2');
  }
}

describe.each(backends)('credentials on %s', (backend) => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime(backend));
  });
  afterAll(async () => drop());

  it('keeps password and key hashes out of every event; sign-in and keys still work, also after a rebuild', async () => {
    const { commands, db } = runtime;
    const email = `owner.${backend}@credentials.example`;
    const password = 'correct horse battery staple';
    const { accountId } = await commands.openAccount({ name: 'Owner', email, password });
    const key = await commands.createApiKey(accountId, { name: 'Reports', scope: 'read' });
    const { staffId } = await commands.addStaffMember({
      name: 'Sam Support',
      email: `sam.${backend}@support.example`,
      password: 'staff password 123',
    });

    const credentials = await db.selectFrom('credentials').selectAll().orderBy('holder_id').execute();
    const passwordHash = credentials.find((c) => c.holder_id === accountId)?.secret ?? '';
    const staffHash = credentials.find((c) => c.holder_id === staffId)?.secret ?? '';
    expect(credentials.map((c) => [c.holder_id, c.kind]).sort()).toEqual(
      [
        [accountId, 'password'],
        [key.keyId, 'api_key'],
        [staffId, 'password'],
      ].sort(),
    );
    expect(passwordHash).toMatch(/^\$argon2id\$/);
    expect(credentials.find((c) => c.holder_id === key.keyId)?.secret).toBe(hashApiKey(key.key));

    const events = await eventData(db);
    expect(events.map((e) => e.type)).toEqual([
      'AccountOpened',
      'PasswordSet',
      'ApiKeyCreated',
      'StaffMemberAdded',
      'PasswordSet',
    ]);
    expectNoSecret(events, [passwordHash, staffHash, hashApiKey(key.key), key.key, password]);

    const check = async (): Promise<void> => {
      const account = await findAccountByEmail(db, email);
      expect(await argon2Verify(account?.password_hash ?? '', password)).toBe(true);
      expect(await findApiKeyByHash(db, hashApiKey(key.key))).toMatchObject({
        id: key.keyId,
        account_id: accountId,
        scope: 'read',
      });
    };
    await check();
    await rebuild(db, accountsProjector);
    await check();
  });

  it('changes a password: a PasswordChanged event with no secret, the other web sessions ended', async () => {
    const { commands, db } = runtime;
    const email = `changer.${backend}@credentials.example`;
    const { accountId } = await commands.openAccount({
      name: 'Changer',
      email,
      password: 'the first password',
    });
    const at = new Date();
    const expires = new Date(at.getTime() + 3_600_000);
    await db
      .insertInto('web_sessions')
      .values([
        { id_hash: `here-${backend}`, account_id: accountId, created_at: at, expires_at: expires },
        { id_hash: `elsewhere-${backend}`, account_id: accountId, created_at: at, expires_at: expires },
      ])
      .execute();
    await commands.changeAccountPassword(accountId, 'the second password', { by: 'holder' });
    const hash = (await findAccountByEmail(db, email))?.password_hash ?? '';
    expect(await argon2Verify(hash, 'the second password')).toBe(true);
    expect(await argon2Verify(hash, 'the first password')).toBe(false);
    const sessions = await db
      .selectFrom('web_sessions')
      .select('id_hash')
      .where('account_id', '=', accountId)
      .execute();
    expect(sessions).toEqual([]);
    const last = (await runtime.store.readStream(`account-${accountId}`)).at(-1);
    expect(last).toMatchObject({
      type: 'PasswordChanged',
      data: { holder: 'account', holderId: accountId, by: 'holder' },
    });
    expectNoSecret(await eventData(db), [hash]);
  });

  it('refuses a short password or an unknown holder and stores nothing', async () => {
    const { commands, db } = runtime;
    const { accountId } = await commands.openAccount({
      name: 'Short',
      email: `short.${backend}@credentials.example`,
      password: 'long enough password',
    });
    const before = await db
      .selectFrom('credentials')
      .selectAll()
      .where('holder_id', '=', accountId)
      .execute();
    await expect(
      commands.changeAccountPassword(accountId, 'too short', { by: 'holder' }),
    ).rejects.toMatchObject({
      code: 'invalid_request',
    });
    await expect(
      commands.changeAccountPassword('acc_nobody', 'long enough password', { by: 'operator' }),
    ).rejects.toMatchObject({ code: 'not_found' });
    await expect(commands.changeStaffPassword('stf_nobody', 'long enough password')).rejects.toMatchObject({
      code: 'not_found',
    });
    expect(
      await db.selectFrom('credentials').selectAll().where('holder_id', '=', accountId).execute(),
    ).toEqual(before);
    const strays = await db
      .selectFrom('credentials')
      .select('holder_id')
      .where('holder_id', 'in', ['acc_nobody', 'stf_nobody'])
      .execute();
    expect(strays).toEqual([]);
  });

  it('refuses to open an account or add a staff member with a short password, and writes nothing', async () => {
    const { commands, db } = runtime;
    const count = async (table: 'events' | 'credentials'): Promise<number> =>
      Number((await db.selectFrom(table).select(db.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);
    const before = { events: await count('events'), credentials: await count('credentials') };
    const email = `too.short.${backend}@credentials.example`;
    await expect(commands.openAccount({ name: 'Too Short', email, password: 'short' })).rejects.toMatchObject(
      {
        code: 'invalid_request',
        message: 'The password must be at least 12 characters long',
      },
    );
    await expect(
      commands.addStaffMember({ name: 'Too Short', email, password: 'p'.repeat(1025) }),
    ).rejects.toMatchObject({
      code: 'invalid_request',
      message: 'The password must be at most 1024 characters long',
    });
    expect({ events: await count('events'), credentials: await count('credentials') }).toEqual(before);
    expect(await findAccountByEmail(db, email)).toBeUndefined();
  });
});

describe.each(backends)('migration 011 on %s', (backend) => {
  it('moves the hashes out of events written before it, changing nothing else', async () => {
    const test = await createTestDatabase(backend);
    try {
      const db = test.handle.db;
      const migrator = new Migrator({ db, provider: migrationProvider });
      const down = await migrator.migrateTo('2026-11-22-010-lz4-bodies');
      expect(down.error).toBeUndefined();

      const argon = '$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHQ$c29tZWhhc2g';
      const staffArgon = '$argon2id$v=19$m=19456,t=2,p=1$b3RoZXJzYWx0$b3RoZXJoYXNo';
      const keyHash = hashApiKey(`cs_live_${'a'.repeat(48)}`);
      const metadata = JSON.stringify({ at: '2026-11-01T10:00:00.000Z' });
      const old = [
        {
          stream_id: 'account-acc_old',
          version: 1,
          type: 'AccountOpened',
          data: { accountId: 'acc_old', name: 'Old', email: 'old@old.example', passwordHash: argon },
        },
        {
          stream_id: 'account-acc_old',
          version: 2,
          type: 'ApiKeyCreated',
          data: {
            accountId: 'acc_old',
            keyId: 'key_old',
            name: 'Old key',
            prefix: 'cs_live_aaaaaa',
            hash: keyHash,
            scope: 'write',
          },
        },
        {
          stream_id: 'account-acc_nopw',
          version: 1,
          type: 'AccountOpened',
          data: { accountId: 'acc_nopw', name: 'No pw', email: 'nopw@old.example', passwordHash: null },
        },
        {
          stream_id: 'staff-stf_old',
          version: 1,
          type: 'StaffMemberAdded',
          data: { staffId: 'stf_old', name: 'Staff', email: 'staff@old.example', passwordHash: staffArgon },
        },
        {
          stream_id: 'site-site_old',
          version: 1,
          type: 'SiteAdded',
          data: {
            siteId: 'site_old',
            accountId: 'acc_old',
            name: 'Old site',
            domain: 'old.example',
            url: 'https://old.example/',
            hash: 'not a credential',
          },
        },
      ];
      for (const [i, e] of old.entries()) {
        await db
          .insertInto('events')
          .values({
            event_id: `0190c0de-0000-7000-8000-00000000000${i}`,
            stream_id: e.stream_id,
            version: e.version,
            type: e.type,
            data: JSON.stringify(e.data),
            metadata,
          })
          .execute();
      }
      const { rows: before } = await sql<{ position: string; event_id: string; metadata: unknown }>`
        select position, event_id, metadata, recorded_at from events order by position`.execute(db);

      await migrateToLatest(db);

      const credentials = await db
        .selectFrom('credentials')
        .select(['holder_id', 'kind', 'secret'])
        .orderBy('holder_id')
        .execute();
      expect(credentials).toEqual([
        { holder_id: 'acc_old', kind: 'password', secret: argon },
        { holder_id: 'key_old', kind: 'api_key', secret: keyHash },
        { holder_id: 'stf_old', kind: 'password', secret: staffArgon },
      ]);
      const events = await eventData(db);
      expectNoSecret(events.slice(0, 4), [argon, staffArgon, keyHash]);
      expect(events.map((e) => JSON.parse(e.data))).toEqual(
        old.map((e) => {
          if (e.type === 'SiteAdded') return e.data; // not a credential event: untouched
          const { passwordHash: _p, hash: _h, ...rest } = e.data as Record<string, unknown>;
          return rest;
        }),
      );
      const { rows: after } = await sql<{ position: string; event_id: string; metadata: unknown }>`
        select position, event_id, metadata, recorded_at from events order by position`.execute(db);
      expect(after).toEqual(before);

      // The read models rebuilt from the rewritten log: the key and the password still work.
      await rebuild(db, accountsProjector);
      expect(await findApiKeyByHash(db, keyHash)).toMatchObject({ id: 'key_old', account_id: 'acc_old' });
      expect((await findAccountByEmail(db, 'old@old.example'))?.password_hash).toBe(argon);
      expect((await findAccountByEmail(db, 'nopw@old.example'))?.password_hash).toBeNull();
    } finally {
      await test.drop();
    }
  });
});
