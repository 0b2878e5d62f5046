import { hash as argon2Hash, verify as argon2Verify } from '@node-rs/argon2';
import { checkPassword } from '../../../domain/account/password.ts';
import type { Alongside } from './handler.ts';

/*
 * Credentials (a password's or an API key's hash) live in the `credentials` table, written in the
 * transaction of the append that says one was set: never in an event. A password is hashed and checked
 * here only, so that a check against no hash costs what a check against a real one does.
 */

/** Writes a holder's credential of one kind, replacing the one it had, in the append's transaction. */
export function storeCredential(
  holderId: string,
  kind: 'password' | 'api_key',
  secret: string,
  at: Date,
): Alongside {
  return async (trx) => {
    await trx
      .insertInto('credentials')
      .values({ holder_id: holderId, kind, secret, updated_at: at })
      .onConflict((oc) => oc.columns(['holder_id', 'kind']).doUpdateSet({ secret, updated_at: at }))
      .execute();
  };
}

/** Checks a new password against the policy (domain/account/password.ts) and stores its argon2 hash. */
export async function storePassword(holderId: string, password: string, at: Date): Promise<Alongside> {
  checkPassword(password);
  return storeCredential(holderId, 'password', await argon2Hash(password), at);
}

/** A hash of nothing anyone knows, made like every real one: verifying against it costs the same. */
let dummyHash: Promise<string> | undefined;
function dummy(): Promise<string> {
  dummyHash ??= argon2Hash(`no account ${Math.random()}`);
  return dummyHash;
}

/** Whether `password` matches `hash`, after the same work when there is no hash (a dummy one is used). */
export async function passwordMatches(hash: string | null | undefined, password: string): Promise<boolean> {
  try {
    const ok = await argon2Verify(hash ?? (await dummy()), password);
    return ok && Boolean(hash);
  } catch {
    return false;
  }
}
