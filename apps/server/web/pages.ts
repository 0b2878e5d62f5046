import type { FastifyPluginAsync } from 'fastify';
import type { Application } from '../../application/index.ts';
import { activityPage } from './activity.ts';
import type { WebKit } from './kit.ts';

export type PagesDeps = { kit: WebKit; application: Application };

/**
 * The web app's pages over the application layer (CONTRACT "Web app"): each page module is a plugin
 * of its own, registered here.
 */
export const webPages: FastifyPluginAsync<PagesDeps> = async (app, deps) => {
  // `/`: the person's sites when signed in, else sign-in (coming back to them).
  app.get('/', { schema: { hide: true } }, async (request, reply) => {
    const session = await deps.kit.sessions.current(request);
    return reply
      .header('cache-control', 'no-store')
      .redirect(session ? '/sites' : deps.kit.signInUrl('/sites'), 303);
  });
  await app.register(activityPage, { kit: deps.kit, application: deps.application });
};
