import type { KeyScope } from '../../domain/account/events.ts';
import { type ApiKeyRow, listApiKeys } from '../../projections/accounts.ts';
import type { ApplicationDeps } from './deps.ts';

export type Keys = ReturnType<typeof createKeys>;

/**
 * An account's API keys: the account holder's own business (the Connect Site page) or the operator's
 * (the CLI), so these take the account rather than a caller's principal.
 */
export function createKeys(deps: Pick<ApplicationDeps, 'db' | 'commands'>) {
  const { db, commands } = deps;
  return {
    /** The account's keys, newest first, with when each was last used; never the secret. */
    list: (accountId: string): Promise<ApiKeyRow[]> => listApiKeys(db, accountId),
    /** A new key: the secret is in this answer only (its hash is stored). */
    create: (
      accountId: string,
      input: { name: string; scope: KeyScope },
    ): Promise<{ keyId: string; key: string; prefix: string; scope: KeyScope }> =>
      commands.createApiKey(accountId, input),
    /** Revokes a key of the account; `revoked: false` when it was revoked already. */
    revoke: (accountId: string, keyId: string): Promise<{ revoked: boolean }> =>
      commands.revokeApiKey(accountId, keyId),
  };
}
