import { describe, it } from 'vitest';
import {
  type AccountCommand,
  type AccountState,
  decideAccount,
  evolveAccount,
  initialAccountState,
} from '../../domain/account/decider.ts';
import type { AccountEvent } from '../../domain/account/events.ts';
import { specFor } from '../support/decider.ts';

const spec = specFor<AccountState, AccountEvent, AccountCommand>({
  initialState: initialAccountState,
  evolve: evolveAccount,
  decide: decideAccount,
});
const metadata = { at: '2026-11-02T09:30:00.000Z' };
const opened: AccountEvent = {
  type: 'AccountOpened',
  data: { accountId: 'acc_1', name: 'Plumbers Ltd', email: 'owner@plumbers.example', passwordHash: null },
  metadata,
};
const keyData = {
  accountId: 'acc_1',
  keyId: 'key_1',
  name: 'Reports',
  prefix: 'cs_live_ab12',
  hash: 'a'.repeat(64),
  scope: 'read' as const,
};

describe('account decider', () => {
  it('opens an account once', () => {
    spec.given([]).when({ type: 'OpenAccount', data: opened.data, metadata }).thenEvents([opened]);
    spec.given([opened]).when({ type: 'OpenAccount', data: opened.data, metadata }).thenThrows('conflict');
  });

  it('creates and revokes a key; revoking twice changes nothing', () => {
    const created: AccountEvent = { type: 'ApiKeyCreated', data: keyData, metadata };
    spec.given([opened]).when({ type: 'CreateApiKey', data: keyData, metadata }).thenEvents([created]);
    const revoke = { type: 'RevokeApiKey' as const, data: { accountId: 'acc_1', keyId: 'key_1' }, metadata };
    spec
      .given([opened, created])
      .when(revoke)
      .thenEvents([{ type: 'ApiKeyRevoked', data: revoke.data, metadata }]);
    spec
      .given([opened, created, { type: 'ApiKeyRevoked', data: revoke.data, metadata }])
      .when(revoke)
      .thenEvents([]);
  });

  it('refuses keys on an unknown account and revoking an unknown key', () => {
    spec.given([]).when({ type: 'CreateApiKey', data: keyData, metadata }).thenThrows('not_found');
    spec
      .given([opened])
      .when({ type: 'RevokeApiKey', data: { accountId: 'acc_1', keyId: 'nope' }, metadata })
      .thenThrows('not_found');
  });
});
