import { hash as argon2Hash } from '@node-rs/argon2';
import { checkPassword } from '../../../domain/account/password.ts';
import type { Alongside } from './handler.ts';

/*
 * Credentials (a password's or an API key's hash) live in the `credentials` table, written in the
 * transaction of the append that says one was set: never in an event.
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
