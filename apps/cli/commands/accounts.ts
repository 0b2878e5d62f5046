import { unwrap } from '../../application/call.ts';
import type { CommandModule } from '../command.ts';
import { recordOperatorChange } from '../operator.ts';
import { peopleCommand } from './people.ts';

/** `accounts create|set-password`: an account holder's account, made or given a new password by an operator. */
export const run: CommandModule['run'] = peopleCommand({
  name: 'accounts',
  async create(accounts, rt, person) {
    const { accountId } = unwrap(await accounts.open(person));
    await recordOperatorChange(rt, accountId, 'open_account');
    return { account_id: accountId };
  },
  async setPassword(credentials, rt, email, password) {
    const account = unwrap(await credentials.setAccountPassword(email, password));
    await recordOperatorChange(rt, account.id, 'change_password');
    return { account_id: account.id, email: account.email };
  },
});
