import { DomainError } from '../errors.ts';
import type { Command } from '../event.ts';
import { requireText } from '../input.ts';
import type { AccountEvent, KeyScope, PasswordChanged } from './events.ts';

export type ApiKeyState = { readonly keyId: string; readonly revoked: boolean };
export type AccountState =
  | { readonly exists: false }
  | { readonly exists: true; readonly accountId: string; readonly keys: ReadonlyMap<string, ApiKeyState> };

export const initialAccountState: AccountState = { exists: false };

export function evolveAccount(state: AccountState, event: AccountEvent): AccountState {
  switch (event.type) {
    case 'AccountOpened':
      return { exists: true, accountId: event.data.accountId, keys: new Map() };
    case 'ApiKeyCreated': {
      if (!state.exists) return state;
      const keys = new Map(state.keys);
      keys.set(event.data.keyId, { keyId: event.data.keyId, revoked: false });
      return { ...state, keys };
    }
    case 'ApiKeyRevoked': {
      if (!state.exists) return state;
      const keys = new Map(state.keys);
      keys.set(event.data.keyId, { keyId: event.data.keyId, revoked: true });
      return { ...state, keys };
    }
    case 'StaffMemberAdded':
    case 'PasswordSet':
    case 'PasswordChanged':
      return state;
    default: {
      const unknown: never = event;
      throw new Error(`unknown account event ${JSON.stringify(unknown)}`);
    }
  }
}

/** `withPassword`: a password is stored with it (its hash goes to the credentials, never into an event). */
export type OpenAccount = Command<
  'OpenAccount',
  { accountId: string; name: string; email: string; withPassword: boolean }
>;
export type CreateApiKey = Command<
  'CreateApiKey',
  { accountId: string; keyId: string; name: string; prefix: string; scope: KeyScope }
>;
export type RevokeApiKey = Command<'RevokeApiKey', { accountId: string; keyId: string }>;
export type ChangeAccountPassword = Command<
  'ChangeAccountPassword',
  { accountId: string; by: PasswordChanged['data']['by'] }
>;
export type AccountCommand = OpenAccount | CreateApiKey | RevokeApiKey | ChangeAccountPassword;

export function decideAccount(command: AccountCommand, state: AccountState): AccountEvent[] {
  const metadata = command.metadata;
  switch (command.type) {
    case 'OpenAccount': {
      if (state.exists) throw new DomainError('conflict', `Account ${command.data.accountId} exists already`);
      const { accountId, name, email, withPassword } = command.data;
      requireText('name', name, { lines: false });
      const opened: AccountEvent = { type: 'AccountOpened', data: { accountId, name, email }, metadata };
      if (!withPassword) return [opened];
      return [opened, { type: 'PasswordSet', data: { holder: 'account', holderId: accountId }, metadata }];
    }
    case 'CreateApiKey':
      if (!state.exists) throw new DomainError('not_found', `No account ${command.data.accountId}`);
      if (state.keys.has(command.data.keyId)) {
        throw new DomainError('conflict', `Key ${command.data.keyId} exists already`);
      }
      requireText('name', command.data.name, { lines: false });
      return [{ type: 'ApiKeyCreated', data: command.data, metadata }];
    case 'RevokeApiKey': {
      if (!state.exists) throw new DomainError('not_found', `No account ${command.data.accountId}`);
      const key = state.keys.get(command.data.keyId);
      if (!key) throw new DomainError('not_found', `No key ${command.data.keyId} on this account`);
      if (key.revoked) return [];
      return [{ type: 'ApiKeyRevoked', data: command.data, metadata }];
    }
    case 'ChangeAccountPassword':
      if (!state.exists) throw new DomainError('not_found', `No account ${command.data.accountId}`);
      return [
        {
          type: 'PasswordChanged',
          data: { holder: 'account', holderId: command.data.accountId, by: command.data.by },
          metadata,
        },
      ];
    default: {
      const unknown: never = command;
      throw new Error(`unknown account command ${JSON.stringify(unknown)}`);
    }
  }
}

/** Support staff: their stream holds StaffMemberAdded and their password events. */
export type StaffState = { readonly exists: false } | { readonly exists: true; readonly staffId: string };
export const initialStaffState: StaffState = { exists: false };

export function evolveStaff(state: StaffState, event: AccountEvent): StaffState {
  return event.type === 'StaffMemberAdded' ? { exists: true, staffId: event.data.staffId } : state;
}

export type AddStaffMember = Command<
  'AddStaffMember',
  { staffId: string; name: string; email: string; withPassword: boolean }
>;
export type ChangeStaffPassword = Command<'ChangeStaffPassword', { staffId: string }>;
export type StaffCommand = AddStaffMember | ChangeStaffPassword;

export function decideStaff(command: StaffCommand, state: StaffState): AccountEvent[] {
  const metadata = command.metadata;
  switch (command.type) {
    case 'AddStaffMember': {
      if (state.exists)
        throw new DomainError('conflict', `Staff member ${command.data.staffId} exists already`);
      const { staffId, name, email, withPassword } = command.data;
      requireText('name', name, { lines: false });
      const added: AccountEvent = { type: 'StaffMemberAdded', data: { staffId, name, email }, metadata };
      if (!withPassword) return [added];
      return [added, { type: 'PasswordSet', data: { holder: 'staff', holderId: staffId }, metadata }];
    }
    case 'ChangeStaffPassword':
      if (!state.exists) throw new DomainError('not_found', `No staff member ${command.data.staffId}`);
      return [
        {
          type: 'PasswordChanged',
          data: { holder: 'staff', holderId: command.data.staffId, by: 'operator' },
          metadata,
        },
      ];
    default: {
      const unknown: never = command;
      throw new Error(`unknown staff command ${JSON.stringify(unknown)}`);
    }
  }
}
