import { DomainError } from '../../domain/errors.ts';
import {
  findAccount,
  findAccountByEmail,
  findStaffByEmail,
  isEmailTaken,
} from '../../projections/accounts.ts';
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
    /**
     * A new account (`invalid_request` for a name or email the account's rules refuse, `conflict` for
     * an email an account has already, in any case).
     */
    open: (person: NewPerson): Promise<Outcome<{ accountId: string }>> =>
      outcomeOf({}, async () => {
        const taken = (): DomainError =>
          new DomainError('conflict', 'An account with this email exists already');
        if (await findAccountByEmail(db, person.email)) throw taken();
        // Another opening with this email may be written between the check and this one.
        return commands.openAccount(person).catch((error: unknown) => {
          throw isEmailTaken(error, 'accounts_email') ? taken() : error;
        });
      }),
    /** A new support staff member (`conflict` for an email a staff member has already). */
    addStaff: (person: NewPerson): Promise<Outcome<{ staffId: string }>> =>
      outcomeOf({}, async () => {
        const taken = (): DomainError =>
          new DomainError('conflict', 'A staff member with this email exists already');
        if (await findStaffByEmail(db, person.email)) throw taken();
        return commands.addStaffMember(person).catch((error: unknown) => {
          throw isEmailTaken(error, 'staff_email') ? taken() : error;
        });
      }),
    /** The account with this id, for the authorization server's subject; undefined when there is none. */
    find: (accountId: string) => findAccount(db, accountId),
  };
}
