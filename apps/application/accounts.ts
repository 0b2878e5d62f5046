import { findAccount, findAccountByEmail, findStaffByEmail } from '../../projections/accounts.ts';
import type { ApplicationDeps } from './deps.ts';

export type Accounts = ReturnType<typeof createAccounts>;

/**
 * Accounts and support staff: opening them and finding them (by id for the authorization server, by
 * email for the CLI). Their passwords are the credentials use cases' (credentials.ts).
 */
export function createAccounts(deps: Pick<ApplicationDeps, 'db' | 'commands'>) {
  const { db, commands } = deps;
  return {
    open: commands.openAccount,
    find: (accountId: string) => findAccount(db, accountId),
    findByEmail: (email: string) => findAccountByEmail(db, email),
    addStaff: commands.addStaffMember,
    findStaffByEmail: (email: string) => findStaffByEmail(db, email),
  };
}
