import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Html } from './html.ts';

/** A signed-in account holder, as the pages of another face see the web session. */
export type PageSession = {
  accountId: string;
  account: { id: string; name: string; email: string };
  /** The session cookie's value: the CSRF tokens of its forms derive from it. Never log it. */
  secret: string;
};

/** A page to send: its status (200 by default), title and body, and whose page it is. */
export type PageOptions = {
  status?: number;
  title: string;
  body: Html;
  session: PageSession | null;
  request: FastifyRequest;
};

/**
 * What the web face lends the server-rendered pages of another face (the authorization server's
 * consent and error pages): the web session, the layout, forms and their refusals. The web face builds
 * it from its kit (apps/server/web/index.ts); the composition root hands it over.
 */
export type PageKit = {
  now(): Date;
  /** The request's live account session, or null. */
  session(request: FastifyRequest): Promise<PageSession | null>;
  /** `/sign-in?return_to=...` for a local path. */
  signInUrl(returnTo: string): string;
  /** The hidden CSRF field for a form on this page. */
  csrfField(request: FastifyRequest, reply: FastifyReply, session: PageSession): Html;
  /** True when the POST passes the CSRF checks; otherwise sends a 403 page and returns false. */
  checkForm(request: FastifyRequest, reply: FastifyReply, session: PageSession): boolean;
  /** Sends a page in the layout, with the account's navigation when signed in. */
  send(reply: FastifyReply, opts: PageOptions): FastifyReply;
  /**
   * Makes a plugin's routes pages, in this order: the form parser, the page headers (`keepOpener`:
   * without the opener policy, for pages an assistant may open in a popup), the refusal pages.
   */
  installPages(app: FastifyInstance, opts: { keepOpener?: boolean }): void;
  /** Sends the 404 page of an address no route takes. */
  notFound(reply: FastifyReply, detail: string): FastifyReply;
  /** A page in the layout without navigation, as text: for answers sent outside fastify. */
  standalone(opts: { title: string; body: Html }): string;
  /** The headers every page carries. */
  headers: Readonly<Record<string, string>>;
};
