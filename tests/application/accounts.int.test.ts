import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Accounts, createAccounts } from '../../apps/application/accounts.ts';
import type { Runtime } from '../../apps/runtime.ts';
import { backends } from '../support/db.ts';
import { refusal } from '../support/errors.ts';
import { createTestRuntime } from '../support/runtime.ts';

/*
 * Opening accounts and adding staff: an email is one person's, in any case, also when two openings
 * with it are under way at once (each finds it free before the other is written: the unique index
 * refuses the second, and the use case says so as it says it for one made before).
 */

describe.each(backends)('accounts and staff on %s', (backend) => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  let accounts: Accounts;
  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime(backend));
    accounts = createAccounts(runtime);
  });
  afterAll(async () => drop());

  const codes = (outcomes: Promise<unknown>[]): Promise<string[]> =>
    Promise.all(outcomes.map((o) => refusal(o))).then((c) => c.sort());

  it('opens one account of four opened at once with one email, and refuses the others as a conflict', async () => {
    const person = (n: number) => ({
      name: `Owner ${n}`,
      email: n % 2 ? 'Race@Accounts.Example' : 'race@accounts.example',
      password: 'correct horse battery staple',
    });
    expect(await codes([1, 2, 3, 4].map((n) => accounts.open(person(n))))).toEqual([
      'accepted',
      'conflict',
      'conflict',
      'conflict',
    ]);
    const rows = await runtime.db
      .selectFrom('accounts')
      .select('id')
      .where('email', 'ilike', 'race@accounts.example')
      .execute();
    expect(rows).toHaveLength(1);
    const opened = await runtime.db
      .selectFrom('events')
      .select('type')
      .where('type', '=', 'AccountOpened')
      .execute();
    expect(opened).toHaveLength(1);
    // And one opened before: the check's refusal, the same words.
    const again = await accounts.open(person(5));
    expect(again.ok ? null : (again.error as Error).message).toBe(
      'An account with this email exists already',
    );
  });

  it('adds one staff member of three added at once with one email', async () => {
    const person = { name: 'Sam', email: 'sam@support.example', password: 'staff password 123' };
    expect(await codes([1, 2, 3].map(() => accounts.addStaff(person)))).toEqual([
      'accepted',
      'conflict',
      'conflict',
    ]);
    const rows = await runtime.db.selectFrom('staff').select('id').execute();
    expect(rows).toHaveLength(1);
  });
});
