import type { CommandModule } from '../command.ts';
import { recordOperatorChange } from '../operator.ts';
import { peopleCommand } from './people.ts';

/** `accounts create|set-password`: an account holder's account, made or given a new password by an operator. */
export const run: CommandModule['run'] = peopleCommand({
  name: 'accounts',
  async create(accounts, rt, person) {
    const { accountId } = await accounts.open(person);
    await recordOperatorChange(rt, accountId, 'open_account');
    return { account_id: accountId };
  },
  async setPassword({ accounts, credentials }, rt, email, password) {
    const { DomainError } = await import('../../../domain/errors.ts');
    const account = await accounts.findByEmail(email);
    if (!account) throw new DomainError('not_found', `No account with email ${email}`);
    await credentials.setAccountPassword(account.id, password);
    await recordOperatorChange(rt, account.id, 'change_password');
    return { account_id: account.id, email: account.email };
  },
});
