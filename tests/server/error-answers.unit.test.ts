import Fastify, {
  type FastifyError,
  type FastifyInstance,
  type FastifyPluginAsync,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { answerErrorsWith, installErrorHandling } from '../../apps/server/http/errors.ts';
import { DomainError } from '../../domain/errors.ts';

/*
 * The one error handler asks the scope of the route that failed for its face's answer
 * (answerErrorsWith): an inner scope's answer first, then the outer one's, then problem+json.
 */

let app: FastifyInstance;
afterEach(async () => app?.close());

const fail =
  (error: Error): FastifyPluginAsync =>
  async (scope) => {
    scope.get('/fail', async () => {
      throw error;
    });
  };

/** An answer that sends `text` for errors whose message is `message`, and leaves the others. */
const answering =
  (message: string, text: string) =>
  async (error: FastifyError, _request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | null> =>
    error.message === message ? reply.status(418).type('text/plain').send(text) : null;

async function build(error: Error): Promise<FastifyInstance> {
  const root = Fastify();
  installErrorHandling(root);
  await root.register(fail(error), { prefix: '/api' });
  await root.register(
    async (pages) => {
      answerErrorsWith(pages, answering('page', 'the page'));
      await pages.register(fail(error));
      await pages.register(
        async (editor) => {
          answerErrorsWith(editor, answering('editor', 'the editor'));
          await editor.register(fail(error));
        },
        { prefix: '/editor' },
      );
    },
    { prefix: '/pages' },
  );
  await root.ready();
  return root;
}

describe('one error handler, answers by scope', () => {
  it("answers with the route's scope's answer, an inner scope's first, then the outer one's", async () => {
    app = await build(new Error('page'));
    expect((await app.inject('/pages/fail')).body).toBe('the page');
    expect((await app.inject('/pages/editor/fail')).body).toBe('the page');
    const api = await app.inject('/api/fail');
    expect(api.statusCode).toBe(500);
    expect(api.headers['content-type']).toMatch(/^application\/problem\+json/);
    await app.close();

    app = await build(new Error('editor'));
    expect((await app.inject('/pages/editor/fail')).body).toBe('the editor');
    expect((await app.inject('/pages/fail')).statusCode).toBe(500);
  });

  it('leaves what no answer takes to problem+json, with its code', async () => {
    app = await build(new DomainError('not_found', 'No such thing'));
    for (const url of ['/api/fail', '/pages/fail', '/pages/editor/fail']) {
      const res = await app.inject(url);
      expect(res.statusCode, url).toBe(404);
      expect(res.json(), url).toMatchObject({ code: 'not_found', detail: 'No such thing' });
    }
  });

  it('answers an answer that fails as its failure, in problem+json', async () => {
    app = Fastify();
    installErrorHandling(app);
    await app.register(async (pages) => {
      answerErrorsWith(pages, async () => {
        throw new DomainError('conflict', 'The page could not be made');
      });
      await pages.register(fail(new Error('anything')));
    });
    const res = await app.inject('/fail');
    expect(res.statusCode).toBe(409);
    expect(res.json()).toMatchObject({ code: 'conflict', detail: 'The page could not be made' });
  });
});
