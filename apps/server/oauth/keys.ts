import { generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import type { Db } from '../../../infra/db/schema.ts';

/*
 * The authorization server's secrets, generated the first time a server starts on a database and
 * persisted in `oauth_keys`, so every process of a deployment, and every restart, uses the same ones:
 *
 * - `signing-keys`: the JSON Web Key Set the provider signs with (an RS256 key; ID tokens, if a client
 *   asks for `openid`). Access tokens are opaque and signed by nothing.
 * - `cookie-keys`: the keys oidc-provider signs its cookies with.
 * - `web-secret`: the key of the web pages' CSRF tokens (HMAC).
 *
 * Each row is inserted only if absent (`on conflict do nothing`) and then read back: two processes
 * starting at once agree on whichever row won. Nothing here ever replaces a row that exists.
 */

export type OAuthSecrets = {
  /** Private JWKs (with `kid`, `alg`, `use`). */
  signingKeys: Record<string, unknown>[];
  cookieKeys: string[];
  webSecret: Buffer;
};

function newSigningKeys(): Record<string, unknown>[] {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return [{ ...privateKey.export({ format: 'jwk' }), kid: randomUUID(), alg: 'RS256', use: 'sig' }];
}

async function loadOrCreate<T>(db: Db, id: string, create: () => T): Promise<T> {
  const existing = await db
    .selectFrom('oauth_keys')
    .select('material')
    .where('id', '=', id)
    .executeTakeFirst();
  if (existing) return existing.material as T;
  await db
    .insertInto('oauth_keys')
    .values({ id, material: JSON.stringify(create()) })
    .onConflict((oc) => oc.column('id').doNothing())
    .execute();
  const row = await db
    .selectFrom('oauth_keys')
    .select('material')
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
  return row.material as T;
}

/** The persisted secrets, created on first use. */
export async function loadOAuthSecrets(db: Db): Promise<OAuthSecrets> {
  const signingKeys = await loadOrCreate(db, 'signing-keys', newSigningKeys);
  const cookieKeys = await loadOrCreate(db, 'cookie-keys', () => [randomBytes(32).toString('base64url')]);
  const webSecret = await loadOrCreate(db, 'web-secret', () => randomBytes(32).toString('base64url'));
  return { signingKeys, cookieKeys, webSecret: Buffer.from(webSecret, 'base64url') };
}
