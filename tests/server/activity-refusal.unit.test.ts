import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { CallEntry } from '../../apps/application/activity.ts';
import { ActivitySpoolFull } from '../../apps/application/commands/activity-batcher.ts';
import { createActivityLog } from '../../apps/server/http/activity-log.ts';
import { installErrorHandling } from '../../apps/server/http/errors.ts';
import { PATIENCE } from '../support/wait.ts';

/*
 * A call that would be recorded while the activity log cannot take more records (its spool full, the
 * database away) is refused before it runs: 503 problem+json with Retry-After, and no record.
 */

const acting = {
  accountId: 'acc_1',
  actor: { type: 'api_key' as const, id: 'key_1', name: 'Production' },
  refused: false,
};
const away = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });

describe('the activity log at its spool bound', () => {
  let app: FastifyInstance;
  afterEach(async () => app?.close());

  function appWith(refusal: () => Error | null, records: CallEntry[], ran: string[]): FastifyInstance {
    app = Fastify();
    installErrorHandling(app);
    const log = createActivityLog(
      {
        record: async (entry) => {
          records.push(entry);
        },
        refusal,
      },
      'api',
      () => acting,
    );
    app.addHook('onRequest', async (request, reply) => log.onRequest(request, reply));
    app.get('/sites', { config: { operation: 'list_sites' } }, async () => {
      ran.push('list_sites');
      return { data: [] };
    });
    return app;
  }

  it('refuses a call that would be recorded with 503 and Retry-After, before it runs, and records nothing', async () => {
    const records: CallEntry[] = [];
    const ran: string[] = [];
    appWith(() => new ActivitySpoolFull(20_000, away), records, ran);
    const res = await app.inject({ method: 'GET', url: '/sites' });
    expect(res.statusCode).toBe(503);
    expect(res.headers['retry-after']).toBe('5');
    expect(res.headers['content-type']).toContain('application/problem+json');
    expect(res.json()).toMatchObject({ code: 'unavailable', status: 503 });
    expect(res.body).not.toMatch(/ECONN|activity records/);
    expect(ran).toEqual([]);
    // The next call, the spool below its bound again, runs and is recorded: that one was not.
    await app.close();
    appWith(() => null, records, ran);
    const ok = await app.inject({ method: 'GET', url: '/sites' });
    expect(ok.statusCode).toBe(200);
    await vi.waitFor(() => expect(records).toHaveLength(1), PATIENCE);
    expect(records[0]).toMatchObject({ accountId: 'acc_1', operation: 'list_sites' });
    expect(ran).toEqual(['list_sites']);
  });
});
