import type { FastifyInstance } from 'fastify';
import type { PageKit } from '../http/page-kit.ts';
import { favicon } from './favicon.ts';
import { page } from './html.ts';
import {
  createWebKit,
  installFormParser,
  installPageHeaders,
  PAGE_HEADERS,
  type WebDeps,
  type WebKit,
} from './kit.ts';
import { installPageErrors, PAGE_REFUSALS } from './refusal.ts';
import { webRoutes } from './sign-in.ts';

/**
 * The web face on the root app: its kit (sessions, CSRF, the layout, forms) and the sign-in pages.
 * Returns the kit, for the other pages of the face, and the PageKit it lends the authorization
 * server's pages.
 */
export async function registerWeb(
  app: FastifyInstance,
  deps: WebDeps,
): Promise<{ kit: WebKit; pages: PageKit }> {
  const kit = createWebKit(deps);
  await app.register(webRoutes, { kit });
  await app.register(favicon);
  return { kit, pages: pageKitOf(kit) };
}

/** What another face's pages may use of the web kit. */
function pageKitOf(kit: WebKit): PageKit {
  return {
    now: () => kit.now(),
    session: (request) => kit.sessions.current(request),
    signInUrl: (returnTo) => kit.signInUrl(returnTo),
    csrfField: (request, reply, session) => kit.csrfField(request, reply, session),
    checkForm: (request, reply, session) => kit.checkForm(request, reply, session),
    send: (reply, opts) => kit.send(reply, opts),
    installPages(app, opts) {
      installFormParser(app, kit);
      installPageHeaders(app, opts);
      installPageErrors(app, kit);
    },
    notFound: (reply, detail) => PAGE_REFUSALS.send(reply, { status: 404, detail }),
    standalone: (opts) => page(opts),
    headers: PAGE_HEADERS,
  };
}
