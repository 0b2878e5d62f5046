import Fastify, { type FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config } from '../../infra/config.ts';
import { pendingMigrations } from '../../infra/db/migrate.ts';
import { newId } from '../../infra/ids.ts';
import { projectionStatus } from '../../infra/projection-runner.ts';
import type { Runtime } from '../../infra/runtime.ts';
import { projectors } from '../../projections/index.ts';
import { apiV1, type LimitHook } from './api/index.ts';
import { installErrorHandling } from './errors.ts';

export type AppDeps = {
  runtime: Runtime;
  config: Pick<Config, 'PUBLIC_URL' | 'LOG_LEVEL'>;
  /** The clock (periods such as this_month); tests fix it. */
  now?: () => Date;
  limit?: LimitHook;
  /** A pino instance or options; tests pass `false` to keep quiet. */
  logger?: boolean | object;
};

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
/** Above this many unapplied events an async read model is reported as lagging (still ready). */
const LAG_WARNING = 10_000;

/** The fastify app, without listening: tests inject into it or listen on port 0. */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    logger: deps.logger ?? {
      level: deps.config.LOG_LEVEL,
      redact: ['req.headers.authorization', 'req.headers["x-api-key"]', 'req.headers.cookie'],
    },
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : newId('req');
    },
    bodyLimit: 3 * 1024 * 1024,
    return503OnClosing: true,
  }).withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  installErrorHandling(app);

  const { db } = deps.runtime;

  app.get(
    '/healthz',
    { schema: { hide: true, response: { 200: z.object({ status: z.literal('ok') }) } } },
    async () => ({ status: 'ok' as const }),
  );

  const Readiness = z.object({
    status: z.enum(['ready', 'not_ready']),
    checks: z.object({
      database: z.object({ ok: z.boolean(), kind: z.string(), error: z.string().optional() }),
      migrations: z.object({ ok: z.boolean(), pending: z.array(z.string()) }),
      projections: z.array(
        z.object({ name: z.string(), mode: z.string(), lag: z.number(), lagging: z.boolean() }),
      ),
    }),
  });
  app.get(
    '/readyz',
    { schema: { hide: true, response: { 200: Readiness, 503: Readiness } } },
    async (_request, reply) => {
      const kind = deps.runtime.handle.kind;
      let database: z.infer<typeof Readiness>['checks']['database'] = { ok: true, kind };
      let pending: string[] = [];
      let lag: z.infer<typeof Readiness>['checks']['projections'] = [];
      try {
        pending = await pendingMigrations(db);
        lag = (await projectionStatus(db, projectors)).map((p) => ({
          name: p.name,
          mode: p.mode,
          lag: p.lag,
          lagging: p.lag > LAG_WARNING,
        }));
      } catch (error) {
        database = {
          ok: false,
          kind,
          error: error instanceof Error ? error.message.slice(0, 200) : 'unreachable',
        };
      }
      const ready = database.ok && pending.length === 0;
      return reply.status(ready ? 200 : 503).send({
        status: ready ? 'ready' : 'not_ready',
        checks: { database, migrations: { ok: pending.length === 0, pending }, projections: lag },
      });
    },
  );

  await app.register(apiV1, {
    prefix: '/api/v1',
    runtime: deps.runtime,
    publicUrl: deps.config.PUBLIC_URL,
    now: deps.now ?? (() => new Date()),
    ...(deps.limit ? { limit: deps.limit } : {}),
  });

  return app;
}
