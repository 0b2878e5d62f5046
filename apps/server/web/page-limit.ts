import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Counter } from '../../../infra/limits.ts';
import { html } from '../http/html.ts';
import { addressKey, publishDecision } from '../http/limits.ts';
import { markRefusal } from '../http/metrics.ts';
import type { WebKit } from './kit.ts';

/** Whose budget a page view spends: its live session's (account holder or staff), else its client address's. */
async function subjectOf(request: FastifyRequest, kit: WebKit): Promise<string> {
  const session = (await kit.sessions.current(request)) ?? (await kit.sessions.currentStaff(request));
  if (!session) return `ip:${addressKey(request.ip)}`;
  return `session:${createHash('sha256').update(session.secret).digest('base64url').slice(0, 22)}`;
}

/**
 * The `pages` limit as an onRequest hook of a scope of pages, like the API's `requests` limit: every
 * page carries RateLimit-Policy and RateLimit; past the quota it is a 429 page with Retry-After, sent
 * before the request's body is read. The session found here is the one the page reads (cached).
 */
export function installPageLimit(app: FastifyInstance, kit: WebKit, pages: Counter): void {
  app.addHook('onRequest', async (request, reply) => {
    const decision = await pages.consume(await subjectOf(request, kit));
    publishDecision(request, reply, decision);
    if (decision.allowed) return;
    const seconds = Math.max(1, decision.resetSeconds);
    markRefusal(request, 'rate_limited');
    return kit.send(reply, {
      status: 429,
      title: 'Too many pages at once',
      session: await kit.sessions.current(request),
      request,
      body: html`<div class="card"><h1>Too many pages at once</h1>
<p>More than ${pages.policy.quota} pages were opened in one minute from this sign-in (or this address). Wait ${seconds} second${seconds === 1 ? '' : 's'}, then reload the page.</p></div>`,
    });
  });
}
