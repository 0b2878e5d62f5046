import {
  findAccount,
  findAccountByEmail,
  findPasswordHash,
  findStaffByEmail,
} from '../../projections/accounts.ts';
import type { ApplicationDeps } from './deps.ts';

export type Accounts = ReturnType<typeof createAccounts>;

/**
 * Accounts and support staff: opening them, finding them by email (sign-in, the CLI) and their
 * passwords. The password policy is domain/account/password.ts; the command handlers apply it and
 * keep the hash (apps/application/commands/accounts.ts).
 */
export function createAccounts(deps: Pick<ApplicationDeps, 'db' | 'commands'>) {
  const { db, commands } = deps;
  return {
    open: commands.openAccount,
    find: (accountId: string) => findAccount(db, accountId),
    findByEmail: (email: string) => findAccountByEmail(db, email),
    /** The account holder's password hash (null: none set), for checking the current one before a change. */
    passwordHash: (accountId: string): Promise<string | null> => findPasswordHash(db, accountId),
    changePassword: commands.changeAccountPassword,
    addStaff: commands.addStaffMember,
    findStaffByEmail: (email: string) => findStaffByEmail(db, email),
    changeStaffPassword: commands.changeStaffPassword,
  };
}
