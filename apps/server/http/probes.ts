import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Drain } from './drain.ts';

/**
 * The probes of the public port. `GET /healthz` (liveness): 200 while the process lives. `GET /readyz`
 * (readiness, for a load balancer): whether this process takes new requests, nothing more (the details
 * are on the metrics listener: apps/readiness.ts); 503 `stopping` from the drain on. It reads no
 * database: a replica whose database is away stays in the pool and answers 503 `unavailable` itself,
 * with Retry-After.
 */
export const probeRoutes: FastifyPluginAsync<{ drain: Drain }> = async (plain, { drain }) => {
  const app = plain.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/healthz',
    { schema: { hide: true, response: { 200: z.object({ status: z.literal('ok') }) } } },
    async () => ({ status: 'ok' as const }),
  );
  app.get(
    '/readyz',
    {
      schema: {
        hide: true,
        response: {
          200: z.object({ status: z.literal('ready') }),
          503: z.object({ status: z.literal('stopping') }),
        },
      },
    },
    async (_request, reply) =>
      drain.stopping
        ? reply.status(503).send({ status: 'stopping' as const })
        : reply.send({ status: 'ready' as const }),
  );
};
