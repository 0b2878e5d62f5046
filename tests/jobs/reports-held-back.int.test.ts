import { afterAll, beforeAll, expect, it } from 'vitest';
import { makeMonthlyReports } from '../../apps/application/reports.ts';
import type { Runtime } from '../../apps/runtime.ts';
import { openAppendingTransaction } from '../support/log.ts';
import { createTestRuntime, setUpAccount } from '../support/runtime.ts';

/*
 * A month's report is made once, so it counts every event committed before the run, also one that
 * readers of the log cannot see yet: committed behind a transaction still appending to the log (see
 * infra/event-store.ts, readAllEvents). The run waits for it rather than reporting without it.
 */

let runtime: Runtime;
let drop: () => Promise<void>;
let clock = new Date('2026-11-10T08:00:00Z');
const now = (): Date => clock;

beforeAll(async () => {
  ({ runtime, drop } = await createTestRuntime('postgres', { now }));
}, 60_000);
afterAll(async () => drop?.());

it('waits for an event committed behind an open transaction, and counts it once that ends', async () => {
  const { accountId, siteId } = await setUpAccount(runtime);
  // A transaction appending to the log, older than the backlink's, open while the backlink is committed.
  const open = await openAppendingTransaction(runtime.db);
  try {
    await runtime.commands.acquireBacklink(accountId, {
      siteId,
      acquiredOn: '2026-11-20',
      sourceDomain: 'news.example',
      sourceUrl: 'https://news.example/held',
      targetUrl: 'https://northside.example/',
      anchorText: 'Northside',
      anchorType: 'branded',
      category: 'industry',
    });
    clock = new Date('2026-12-01T00:00:05Z');
    const deps = { db: runtime.db, commands: runtime.commands, now };
    // While the transaction is open the backlink cannot be counted: the run waits, then gives up
    // (the job is tried again) and makes no report without it.
    await expect(makeMonthlyReports(deps, '2026-11', { catchUpMs: 300 })).rejects.toThrow(
      "has not reached the log's head",
    );
    const none = await runtime.db
      .selectFrom('events')
      .select('stream_id')
      .where('type', '=', 'MonthlyReportReady')
      .execute();
    expect(none).toEqual([]);

    await open.rollback().execute();
    await makeMonthlyReports(deps, '2026-11');
    const report = await runtime.db
      .selectFrom('events')
      .select('data')
      .where('stream_id', '=', `report-${siteId}-2026-11`)
      .executeTakeFirstOrThrow();
    expect(report.data).toMatchObject({ period: '2026-11', backlinksIndustry: 1, backlinksLocal: 0 });
  } finally {
    await open
      .rollback()
      .execute()
      .catch(() => {});
  }
});
