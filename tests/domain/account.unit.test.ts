import { describe, expect, it } from 'vitest';
import {
  type AccountCommand,
  type AccountState,
  decideAccount,
  decideStaff,
  evolveAccount,
  evolveStaff,
  initialAccountState,
  initialStaffState,
  type StaffCommand,
  type StaffState,
} from '../../domain/account/decider.ts';
import type { AccountEvent } from '../../domain/account/events.ts';
import { validateEvent } from '../../domain/events.ts';
import { specFor } from '../support/decider.ts';
import { accountOpened, apiKeyCreated, metadata } from '../support/events.ts';

const spec = specFor<AccountState, AccountEvent, AccountCommand>({
  initialState: initialAccountState,
  evolve: evolveAccount,
  decide: decideAccount,
});
const opened = accountOpened();
const open = { type: 'OpenAccount' as const, data: { ...opened.data, withPassword: false }, metadata };
const keyData = apiKeyCreated().data;

describe('account decider', () => {
  it('opens an account once', () => {
    spec.given([]).when(open).thenEvents([opened]);
    spec.given([opened]).when(open).thenThrows('conflict');
  });

  it('opens an account with a password: PasswordSet says so, with no secret', () => {
    spec
      .given([])
      .when({ ...open, data: { ...open.data, withPassword: true } })
      .thenEvents([
        opened,
        { type: 'PasswordSet', data: { holder: 'account', holderId: 'acc_1' }, metadata },
      ]);
  });

  it('changes the password of an account that exists', () => {
    const change = {
      type: 'ChangeAccountPassword' as const,
      data: { accountId: 'acc_1', by: 'holder' as const },
      metadata,
    };
    spec
      .given([opened])
      .when(change)
      .thenEvents([
        { type: 'PasswordChanged', data: { holder: 'account', holderId: 'acc_1', by: 'holder' }, metadata },
      ]);
    spec.given([]).when(change).thenThrows('not_found');
  });

  it('creates and revokes a key; revoking twice changes nothing', () => {
    const created = apiKeyCreated();
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

describe('staff decider', () => {
  const staff = specFor<StaffState, AccountEvent, StaffCommand>({
    initialState: initialStaffState,
    evolve: evolveStaff,
    decide: decideStaff,
  });
  const added: AccountEvent = {
    type: 'StaffMemberAdded',
    data: { staffId: 'stf_1', name: 'Sam', email: 'sam@support.example' },
    metadata,
  };

  it('adds a staff member once, with a PasswordSet when a password comes with it', () => {
    const add = { type: 'AddStaffMember' as const, data: { ...added.data, withPassword: true }, metadata };
    staff
      .given([])
      .when(add)
      .thenEvents([added, { type: 'PasswordSet', data: { holder: 'staff', holderId: 'stf_1' }, metadata }]);
    staff.given([added]).when(add).thenThrows('conflict');
  });

  it("changes a staff member's password (by an operator), not an unknown one's", () => {
    const change = { type: 'ChangeStaffPassword' as const, data: { staffId: 'stf_1' }, metadata };
    staff
      .given([added])
      .when(change)
      .thenEvents([
        { type: 'PasswordChanged', data: { holder: 'staff', holderId: 'stf_1', by: 'operator' }, metadata },
      ]);
    staff.given([]).when(change).thenThrows('not_found');
  });
});

describe('account event schemas', () => {
  const hash = 'a'.repeat(64);
  const argon = '$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo';

  it('accept the events without secrets', () => {
    for (const event of [
      opened,
      { type: 'ApiKeyCreated', data: keyData, metadata },
      { type: 'StaffMemberAdded', data: { staffId: 's', name: 'Sam', email: 'sam@x.example' }, metadata },
      { type: 'PasswordSet', data: { holder: 'account', holderId: 'acc_1' }, metadata },
      { type: 'PasswordChanged', data: { holder: 'staff', holderId: 's', by: 'operator' }, metadata },
    ]) {
      expect(() => validateEvent(event)).not.toThrow();
    }
  });

  it('refuse an event that carries a password hash or a key hash', () => {
    const carrying = [
      { type: 'AccountOpened', data: { ...opened.data, passwordHash: argon }, metadata },
      { type: 'AccountOpened', data: { ...opened.data, passwordHash: null }, metadata },
      { type: 'ApiKeyCreated', data: { ...keyData, hash }, metadata },
      {
        type: 'StaffMemberAdded',
        data: { staffId: 's', name: 'Sam', email: 'sam@x.example', passwordHash: argon },
        metadata,
      },
      { type: 'PasswordSet', data: { holder: 'account', holderId: 'acc_1', hash: argon }, metadata },
      {
        type: 'PasswordChanged',
        data: { holder: 'account', holderId: 'acc_1', by: 'holder', passwordHash: argon },
        metadata,
      },
    ];
    for (const event of carrying) {
      expect(() => validateEvent(event), event.type).toThrow(/Unrecognized key/i);
    }
  });
});
