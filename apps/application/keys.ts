import type { KeyScope } from '../../domain/account/events.ts';
import { type ApiKeyRow, findApiKeyByHash, isKeyLive, listApiKeys } from '../../projections/accounts.ts';

/** A key that is unknown or revoked: one answer for both, so that it tells a caller nothing of which. */
export { invalidKeyError } from '../../projections/accounts.ts';

import { type Call, type Outcome, outcomeOf } from './call.ts';
import { type ApplicationDeps, readsOf } from './deps.ts';

export type Keys = ReturnType<typeof createKeys>;

/** A new key: its secret is in this answer only (its hash is stored). */
export type CreatedKey = { keyId: string; key: string; prefix: string; scope: KeyScope };

/**
 * The calling account's API keys: the account holder's (the Connect Site page) or the operator's (the
 * CLI, whose principal is apps/cli/operator.ts'). Authentication's two lookups take a key, not a call:
 * they are what makes a principal.
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
    list: (call: Call): Promise<Outcome<ApiKeyRow[]>> =>
      outcomeOf({}, () => listApiKeys(db, call.principal.accountId)),
    /** A new key of the account (`invalid_request` for a name the key's rules refuse). */
    create(call: Call, input: { name: string; scope: KeyScope }): Promise<Outcome<CreatedKey>> {
      const { accountId } = call.principal;
      return outcomeOf({}, async () => {
        const made = await commands.createApiKey(accountId, input);
        // The reads on replicas confirm the caller's key in their statement: they must find this one.
        await reads.wrote(accountId);
        return made;
      });
    },
    /** Revokes a key of the account (`not_found` for another's); `revoked: false` when it was revoked already. */
    revoke(call: Call, keyId: string): Promise<Outcome<{ revoked: boolean }>> {
      const { accountId } = call.principal;
      return outcomeOf({}, async () => {
        const result = await commands.revokeApiKey(accountId, keyId);
        // The reads on replicas confirm the caller's key in their statement: none must find this one live.
        await reads.wrote(accountId);
        return result;
      });
    },
  };
}
