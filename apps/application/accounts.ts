import { findAccount } from '../../projections/accounts.ts';
import { type Outcome, outcomeOf } from './call.ts';
import type { ApplicationDeps } from './deps.ts';

export type Accounts = ReturnType<typeof createAccounts>;

/** Who is opened: a name, an email and, if given, a first password. */
export type NewPerson = { name: string; email: string; password?: string | null };

/**
 * Accounts and support staff, opened by the operator (the CLI): no principal exists before them, so
 * these take the person. The authorization server's lookup takes an id, not a call: it is what makes
 * a principal. Their passwords are the credentials use cases' (credentials.ts).
 */
export function createAccounts(deps: Pick<ApplicationDeps, 'db' | 'commands'>) {
  const { db, commands } = deps;
  return {
    /** A new account (`invalid_request` for a name or email the account's rules refuse). */
    open: (person: NewPerson): Promise<Outcome<{ accountId: string }>> =>
      outcomeOf({}, () => commands.openAccount(person)),
    /** A new support staff member. */
    addStaff: (person: NewPerson): Promise<Outcome<{ staffId: string }>> =>
      outcomeOf({}, () => commands.addStaffMember(person)),
    /** The account with this id, for the authorization server's subject; undefined when there is none. */
    find: (accountId: string) => findAccount(db, accountId),
  };
}
