import {
  type AccountCommand,
  decideAccount,
  decideStaff,
  evolveAccount,
  evolveStaff,
  initialAccountState,
  initialStaffState,
  type StaffCommand,
} from '../../../domain/account/decider.ts';
import { accountStream, type KeyScope, staffStream } from '../../../domain/account/events.ts';
import { newApiKey, newId } from '../../../infra/ids.ts';
import { storeCredential, storePassword } from './credentials.ts';
import type { Alongside, CommandContext, Unstamped } from './handler.ts';

/*
 * Accounts and support staff: opening them, API keys, passwords. A password is checked against the
 * policy and its hash stored in the transaction of the event that says it was set; a refused one
 * writes nothing.
 */

const accountFold = { initial: initialAccountState, evolve: evolveAccount };
const staffFold = { initial: initialStaffState, evolve: evolveStaff };

export function accountCommands({ run, meta, now }: CommandContext) {
  const onAccount = (accountId: string, command: Unstamped<AccountCommand>, alongside?: Alongside) =>
    run(
      accountStream(accountId),
      accountFold,
      (state) => decideAccount({ ...command, metadata: meta() }, state),
      { alongside },
    );
  const onStaff = (staffId: string, command: Unstamped<StaffCommand>, alongside?: Alongside) =>
    run(staffStream(staffId), staffFold, (state) => decideStaff({ ...command, metadata: meta() }, state), {
      alongside,
    });
  /** The credential write of a password given at creation (none: no password, nothing stored). */
  const initialPassword = (holderId: string, password: string | null | undefined) =>
    password ? storePassword(holderId, password, now()) : Promise.resolve(undefined);

  return {
    async openAccount(input: {
      name: string;
      email: string;
      password?: string | null;
    }): Promise<{ accountId: string }> {
      const accountId = newId('acc');
      const credential = await initialPassword(accountId, input.password);
      const { name, email } = input;
      await onAccount(
        accountId,
        { type: 'OpenAccount', data: { accountId, name, email, withPassword: credential !== undefined } },
        credential,
      );
      return { accountId };
    },

    /**
     * Replaces an account holder's password: the new hash in `credentials` and a `PasswordChanged` event
     * (no secret) in one transaction, which also ends every web session of the account (the browser
     * that changed it is given a new one by the web page).
     */
    async changeAccountPassword(
      accountId: string,
      password: string,
      opts: { by: 'holder' | 'operator' },
    ): Promise<void> {
      const credential = await storePassword(accountId, password, now());
      await onAccount(
        accountId,
        { type: 'ChangeAccountPassword', data: { accountId, by: opts.by } },
        async (trx) => {
          await credential(trx);
          await trx.deleteFrom('web_sessions').where('account_id', '=', accountId).execute();
        },
      );
    },

    async createApiKey(
      accountId: string,
      input: { name: string; scope: KeyScope },
    ): Promise<{ keyId: string; key: string; prefix: string; scope: KeyScope }> {
      const keyId = newId('key');
      const { key, prefix, hash } = newApiKey();
      await onAccount(
        accountId,
        { type: 'CreateApiKey', data: { accountId, keyId, name: input.name, prefix, scope: input.scope } },
        storeCredential(keyId, 'api_key', hash, now()),
      );
      return { keyId, key, prefix, scope: input.scope };
    },

    async revokeApiKey(accountId: string, keyId: string): Promise<{ revoked: boolean }> {
      const result = await onAccount(accountId, { type: 'RevokeApiKey', data: { accountId, keyId } });
      return { revoked: result.events.length > 0 };
    },

    async addStaffMember(input: {
      name: string;
      email: string;
      password?: string | null;
    }): Promise<{ staffId: string }> {
      const staffId = newId('stf');
      const credential = await initialPassword(staffId, input.password);
      const { name, email } = input;
      await onStaff(
        staffId,
        { type: 'AddStaffMember', data: { staffId, name, email, withPassword: credential !== undefined } },
        credential,
      );
      return { staffId };
    },

    /** Replaces a support staff member's password (the CLI's `staff set-password`: no page changes it). */
    async changeStaffPassword(staffId: string, password: string): Promise<void> {
      const credential = await storePassword(staffId, password, now());
      await onStaff(staffId, { type: 'ChangeStaffPassword', data: { staffId } }, credential);
    },
  };
}
