import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Counter } from '../../../infra/limits.ts';
import { accountShare, type HeavyWork, hasHeavyBody, staffShare } from '../http/heavy-work.ts';
import { type Html, html } from '../http/html.ts';
import { addressKey, publishDecision } from '../http/limits.ts';
import { markRefusal } from '../http/metrics.ts';
import type { WebKit } from './kit.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The page is heavy work (a revision's, with its diffs): it spends the heavy-pages budget too (page-limit.ts). */
    heavyPage?: boolean;
  }
}

export type PageLimits = {
  /** Page views per session (PAGE_RATE_LIMIT_PER_MINUTE). */
  pages: Counter;
  /** Heavy pages per account (the API's RATE_LIMIT_PER_MINUTE). */
  heavyPages: Counter;
};

/** Who opens a page: whose page budget, heavy-page budget and share of heavy work it spends. */
type Opener = { pages: string; heavyPages: string; heavyShare: string | null };

/**
 * A page view spends its live session's page budget (account holder or staff), else its client
 * address's; a heavy page spends its account's (or staff member's) heavy-page budget and share of heavy
 * work, across all its sessions, else its address's.
 */
async function openerOf(request: FastifyRequest, kit: WebKit): Promise<Opener> {
  const session = await kit.sessions.current(request);
  const staff = session ? null : await kit.sessions.currentStaff(request);
  const address = `ip:${addressKey(request.ip)}`;
  const secret = session?.secret ?? staff?.secret;
  if (!secret) return { pages: address, heavyPages: address, heavyShare: null };
  return {
    pages: `session:${createHash('sha256').update(secret).digest('base64url').slice(0, 22)}`,
    heavyPages: session ? `acct:${session.accountId}` : `staff:${staff?.staff.id}`,
    heavyShare: session ? accountShare(session.accountId) : staff ? staffShare(staff.staff.id) : null,
  };
}

/**
 * The `pages` limit as an onRequest hook of a scope of pages, like the API's `requests` limit: every
 * page carries RateLimit-Policy and RateLimit; past the quota it is a 429 page with Retry-After, sent
 * before the request's body is read. The session found here is the one the page reads (cached).
 *
 * Heavy pages (a route with `heavyPage`, and any page request with a body of HEAVY_BODY_BYTES or more)
 * also spend the `heavy-pages` limit, the API's quota per account: a person's many sessions (or a script
 * holding one) open at most as many pages that move megabytes a minute as the account's API calls. Every
 * page names its account's (or staff member's) share of heavy work (heavy-work.ts) for when it asks
 * for a turn.
 */
export function installPageLimit(
  app: FastifyInstance,
  kit: WebKit,
  limits: PageLimits,
  heavy: HeavyWork,
): void {
  app.addHook('onRequest', async (request, reply) => {
    const opener = await openerOf(request, kit);
    if (opener.heavyShare) heavy.setShare(request, opener.heavyShare);
    const decision = await limits.pages.consume(opener.pages);
    publishDecision(request, reply, decision);
    if (!decision.allowed) {
      return refuse(
        request,
        reply,
        kit,
        decision.resetSeconds,
        'Too many pages at once',
        (seconds) =>
          html`<p>More than ${limits.pages.policy.quota} pages were opened in one minute from this sign-in (or this address). Wait ${seconds}, then reload the page.</p>`,
      );
    }
    if (request.routeOptions.config.heavyPage !== true && !hasHeavyBody(request)) return;
    const heavyDecision = await limits.heavyPages.consume(opener.heavyPages);
    publishDecision(request, reply, heavyDecision);
    if (heavyDecision.allowed) return;
    return refuse(
      request,
      reply,
      kit,
      heavyDecision.resetSeconds,
      'Too many large pages at once',
      (seconds) =>
        html`<p>More than ${limits.heavyPages.policy.quota} large pages (revisions and their changes, restores, large saves) were opened in one minute for this account (or this address). Wait ${seconds}, then reload the page.</p>`,
    );
  });
}

/** The 429 page of a page limit, with Retry-After (publishDecision set it), before the body is read. */
async function refuse(
  request: FastifyRequest,
  reply: FastifyReply,
  kit: WebKit,
  resetSeconds: number,
  title: string,
  text: (seconds: string) => Html,
): Promise<FastifyReply> {
  const seconds = Math.max(1, resetSeconds);
  markRefusal(request, 'rate_limited');
  return kit.send(reply, {
    status: 429,
    title,
    session: await kit.sessions.current(request),
    request,
    body: html`<div class="card"><h1>${title}</h1>
${text(`${seconds} second${seconds === 1 ? '' : 's'}`)}</div>`,
  });
}
