import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import type { CallEntry } from '../../apps/application/activity.ts';
import { settled } from '../../apps/server/http/outcome.ts';
import { recordChanges } from '../../apps/server/web/call.ts';
import { PATIENCE } from '../support/wait.ts';

/* The pages' changes reach the activity log: a form that names no operation cannot be registered. */

const acting = {
  accountId: 'acc_1',
  actor: { type: 'user' as const, id: 'usr_1', name: 'Ada' },
  refused: false,
};

function pages(records: CallEntry[]) {
  const app = Fastify();
  recordChanges(
    app,
    { actingOf: () => acting },
    {
      record: async (entry) => {
        records.push(entry);
      },
    },
  );
  return app;
}

describe('recordChanges', () => {
  it('refuses at start a form route of the scope that names no operation', async () => {
    const app = pages([]);
    expect(() => app.post('/connect/keys', async () => 'ok')).toThrow(
      '/connect/keys: a change on the pages names its operation',
    );
    await app.close();
  });

  it("records a change with the outcome's subject, a redirect to its result as 200, and not a page read", async () => {
    const records: CallEntry[] = [];
    const app = pages(records);
    app.get('/connect', async () => 'page');
    app.post(
      '/articles/:id/edit',
      { config: { operation: 'update_article', subject: 'article', source: 'editor' } },
      async (request, reply) => {
        settled(request, reply, {
          ok: true,
          value: null,
          subject: { siteId: 'site_1', articleId: 'art_1', revision: 4 },
          edits: null,
        });
        return reply.redirect('/articles/art_1?saved=4', 303);
      },
    );
    // A real socket: the record is made when the response closes.
    const base = await app.listen({ port: 0, host: '127.0.0.1' });
    expect((await fetch(`${base}/connect`)).status).toBe(200);
    const answer = await fetch(`${base}/articles/art_1/edit`, { method: 'POST', redirect: 'manual' });
    expect(answer.status).toBe(303);
    await expect.poll(() => records.length, PATIENCE).toBe(1);
    expect(records[0]).toMatchObject({
      accountId: 'acc_1',
      source: 'editor',
      operation: 'update_article',
      subject: { siteId: 'site_1', articleId: 'art_1', revision: 4 },
      status: 200,
    });
    await app.close();
  });
});
