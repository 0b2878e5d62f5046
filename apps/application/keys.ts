import type { KeyScope } from '../../domain/account/events.ts';
import { type ApiKeyRow, findApiKeyByHash, isKeyLive, listApiKeys } from '../../projections/accounts.ts';

/** A key that is unknown or revoked: one answer for both, so that it tells a caller nothing of which. */
export { invalidKeyError } from '../../projections/accounts.ts';

import { type ApplicationDeps, readsOf } from './deps.ts';

export type Keys = ReturnType<typeof createKeys>;

/**
 * An account's API keys: the account holder's own business (the Connect Site page) or the operator's
 * (the CLI), so these take the account rather than a caller's principal.
 */
export function createKeys(deps: Pick<ApplicationDeps, 'db' | 'reads' | 'commands'>) {
  const { db, commands } = deps;
  const reads = readsOf(deps);
  return {
    /** The key with this hash (revoked ones too: they still name their account), for authentication. */
    findByHash: (hash: string): Promise<ApiKeyRow | undefined> => findApiKeyByHash(db, hash),
    /** Whether a key exists and is not revoked. */
    isLive: (keyId: string): Promise<boolean> => isKeyLive(db, keyId),
    /** The account's keys, newest first, with when each was last used; never the secret. */
    list: (accountId: string): Promise<ApiKeyRow[]> => listApiKeys(db, accountId),
    /** A new key: the secret is in this answer only (its hash is stored). */
    async create(
      accountId: string,
      input: { name: string; scope: KeyScope },
    ): Promise<{ keyId: string; key: string; prefix: string; scope: KeyScope }> {
      const made = await commands.createApiKey(accountId, input);
      // The reads on replicas confirm the caller's key in their statement: they must find this one.
      await reads.wrote(accountId);
      return made;
    },
    /** Revokes a key of the account; `revoked: false` when it was revoked already. */
    async revoke(accountId: string, keyId: string): Promise<{ revoked: boolean }> {
      const result = await commands.revokeApiKey(accountId, keyId);
      // The reads on replicas confirm the caller's key in their statement: none must find this one live.
      await reads.wrote(accountId);
      return result;
    },
  };
}
