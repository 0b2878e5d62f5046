import { DomainError } from '../../domain/errors.ts';
import { findAccountByEmail, findPasswordHash, findStaffByEmail } from '../../projections/accounts.ts';
import { type Call, type Outcome, outcomeOf } from './call.ts';
import { passwordMatches } from './commands/credentials.ts';
import type { ApplicationDeps } from './deps.ts';

export type Credentials = ReturnType<typeof createCredentials>;

/** Who an email and a password signed in: an account holder or a support staff member. */
export type SignedIn = { holder: 'account' | 'staff'; id: string; name: string; email: string };

/** Whose password the operator set: their id and email. */
export type Person = { id: string; email: string };

/**
 * Passwords: who an email and a password sign in, an account holder's change of their own password, and
 * the operator's setting of one (the CLI). The policy is domain/account/password.ts; the hash is made
 * and checked in apps/application/commands/credentials.ts, which keeps it in `credentials`. How often a
 * face lets someone try is the face's (the web's sign-in throttle counts by address and browser).
 */
export function createCredentials(deps: Pick<ApplicationDeps, 'db' | 'commands'>) {
  const { db, commands } = deps;
  return {
    /**
     * The account holder, else the support staff member, whose email and password these are. A wrong
     * password, an unknown email and a holder without a password are one refusal (`unauthenticated`),
     * after the same work: a missing hash is checked against a dummy one made like real ones.
     */
    signIn(input: { email: string; password: string }): Promise<Outcome<SignedIn>> {
      return outcomeOf({}, async () => {
        const account = await findAccountByEmail(db, input.email);
        const staff = account ? undefined : await findStaffByEmail(db, input.email);
        const holder = account ?? staff;
        if (!holder || !(await passwordMatches(holder.password_hash, input.password))) {
          throw new DomainError('unauthenticated', 'That email and password do not match an account');
        }
        const { id, name, email } = holder;
        return { holder: account ? 'account' : 'staff', id, name, email };
      });
    },

    /**
     * The calling account holder's new password, given their current one (`unauthenticated` when it is
     * not): a `PasswordChanged` event by the holder, which ends every web session of the account.
     */
    changePassword(call: Call, input: { current: string; password: string }): Promise<Outcome<void>> {
      const { accountId } = call.principal;
      return outcomeOf({}, async () => {
        if (!(await passwordMatches(await findPasswordHash(db, accountId), input.current))) {
          throw new DomainError('unauthenticated', 'That is not your current password');
        }
        await commands.changeAccountPassword(accountId, input.password, { by: 'holder' });
      });
    },

    /**
     * The password of the account holder with this email, set by the operator (no current one asked): a
     * `PasswordChanged` by the operator (`not_found` when no account has the email).
     */
    setAccountPassword(email: string, password: string): Promise<Outcome<Person>> {
      return outcomeOf({}, async () => {
        const account = await findAccountByEmail(db, email);
        if (!account) throw new DomainError('not_found', `No account with email ${email}`);
        await commands.changeAccountPassword(account.id, password, { by: 'operator' });
        return { id: account.id, email: account.email };
      });
    },

    /** A support staff member's password, set by the operator (no page changes it; `not_found` as above). */
    setStaffPassword(email: string, password: string): Promise<Outcome<Person>> {
      return outcomeOf({}, async () => {
        const staff = await findStaffByEmail(db, email);
        if (!staff) throw new DomainError('not_found', `No staff member with email ${email}`);
        await commands.changeStaffPassword(staff.id, password);
        return { id: staff.id, email: staff.email };
      });
    },
  };
}
