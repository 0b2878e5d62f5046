import { DomainError } from '../errors.ts';
import type { Command } from '../event.ts';
import type { AccountEvent, KeyScope } from './events.ts';

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
      return state;
    default: {
      const unknown: never = event;
      throw new Error(`unknown account event ${JSON.stringify(unknown)}`);
    }
  }
}

export type OpenAccount = Command<
  'OpenAccount',
  { accountId: string; name: string; email: string; passwordHash: string | null }
>;
export type CreateApiKey = Command<
  'CreateApiKey',
  { accountId: string; keyId: string; name: string; prefix: string; hash: string; scope: KeyScope }
>;
export type RevokeApiKey = Command<'RevokeApiKey', { accountId: string; keyId: string }>;
export type AccountCommand = OpenAccount | CreateApiKey | RevokeApiKey;

export function decideAccount(command: AccountCommand, state: AccountState): AccountEvent[] {
  const metadata = command.metadata;
  switch (command.type) {
    case 'OpenAccount':
      if (state.exists) throw new DomainError('conflict', `Account ${command.data.accountId} exists already`);
      return [{ type: 'AccountOpened', data: command.data, metadata }];
    case 'CreateApiKey':
      if (!state.exists) throw new DomainError('not_found', `No account ${command.data.accountId}`);
      if (state.keys.has(command.data.keyId)) {
        throw new DomainError('conflict', `Key ${command.data.keyId} exists already`);
      }
      return [{ type: 'ApiKeyCreated', data: command.data, metadata }];
    case 'RevokeApiKey': {
      if (!state.exists) throw new DomainError('not_found', `No account ${command.data.accountId}`);
      const key = state.keys.get(command.data.keyId);
      if (!key) throw new DomainError('not_found', `No key ${command.data.keyId} on this account`);
      if (key.revoked) return [];
      return [{ type: 'ApiKeyRevoked', data: command.data, metadata }];
    }
    default: {
      const unknown: never = command;
      throw new Error(`unknown account command ${JSON.stringify(unknown)}`);
    }
  }
}
