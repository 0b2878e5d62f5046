import type { FastifyPluginAsync } from 'fastify';
import type { Counter } from '../../../infra/limits.ts';
import type { Application } from '../../application/index.ts';
import type { HeavyWork } from '../http/heavy-work.ts';
import { activityPage } from './activity.ts';
import { apiReferencePage, type OpenApiDocument } from './api-reference.ts';
import { articlePages, type DiffBodies } from './articles.ts';
import { editorRoutes } from './editor.ts';
import { featuredImagePages } from './featured-image.ts';
import type { WebKit } from './kit.ts';
import { installPageLimit } from './page-limit.ts';
import { installPageErrors } from './refusal.ts';
import { reportPages } from './report.ts';
import { webScripts } from './scripts.ts';
import { searchPage } from './search.ts';
import { sitePages } from './sites.ts';
import { staffPages } from './staff.ts';

export type PagesDeps = {
  kit: WebKit;
  application: Application;
  /** Word diffs of revisions, off the server's thread (Runtime.diff). */
  diff: DiffBodies;
  /** Heavy pages (a revision's, with its diffs) one at a time (heavy-work.ts). */
  heavy: HeavyWork;
  /** Page views per session (page-limit.ts). */
  pageLimit: Counter;
  /** Heavy pages per account, the API's quota (page-limit.ts). */
  heavyPageLimit: Counter;
  /** The OpenAPI document the server serves, for the API reference (`/docs`, api-reference.ts). */
  apiDocument: () => OpenApiDocument;
};

/**
 * The web app's pages over the application layer (CONTRACT "Web app"): each page module is a plugin
 * of its own, registered here.
 */
export const webPages: FastifyPluginAsync<PagesDeps> = async (app, deps) => {
  // Every page below: the database being away for now is the 503 page.
  installPageErrors(app, deps.kit);
  await app.register(webScripts);
  // Every page below (not the scripts above) spends its session's page budget; a heavy one its
  // account's heavy-page budget too.
  installPageLimit(app, deps.kit, { pages: deps.pageLimit, heavyPages: deps.heavyPageLimit }, deps.heavy);
  await app.register(staffPages, deps);
  // `/`: the person's sites when signed in, the support area for staff, else sign-in (coming back to the sites).
  app.get('/', { schema: { hide: true } }, async (request, reply) => {
    const session = await deps.kit.sessions.current(request);
    const staff = session ? null : await deps.kit.sessions.currentStaff(request);
    return reply
      .header('cache-control', 'no-store')
      .redirect(session ? '/sites' : staff ? '/staff' : deps.kit.signInUrl('/sites'), 303);
  });
  await app.register(articlePages, deps);
  await app.register(editorRoutes, deps);
  await app.register(featuredImagePages, deps);
  await app.register(sitePages, deps);
  await app.register(reportPages, deps);
  await app.register(activityPage, { kit: deps.kit, application: deps.application });
  await app.register(searchPage, { kit: deps.kit, application: deps.application });
  await app.register(apiReferencePage, { kit: deps.kit, document: deps.apiDocument });
};
