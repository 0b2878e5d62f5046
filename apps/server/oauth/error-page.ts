import { html } from '../http/html.ts';
import type { PageKit } from '../http/page-kit.ts';

/*
 * The page the authorization server shows, on this service, when it refuses a request it will not send
 * back to the client: every error of `GET /oauth/authorize` raised before the person has acted (RFC 9700
 * section 4.11.2: redirecting them would make the service an open redirector for anyone who registers a
 * client), an unknown client or redirect URI, and any error of another endpoint asked for by a browser.
 * It names the problem plainly, then the OAuth error code and description for the assistant's maker.
 */

const PLAINLY: Record<string, string> = {
  invalid_request: 'The assistant sent a request that is incomplete or has a value that is not allowed.',
  invalid_client: 'The assistant is not known here, or its registration could not be read.',
  invalid_client_metadata:
    "The assistant's registration (its metadata document) breaks this service's rules.",
  invalid_redirect_uri:
    'The address the assistant asked to send you back to is not one it registered, so you are not sent there.',
  unauthorized_client: 'The assistant is not allowed to ask for access this way.',
  unsupported_response_type: 'The assistant asked for a kind of answer this service does not give.',
  unsupported_response_mode: 'The assistant asked to be answered in a way this service does not support.',
  invalid_scope: 'The assistant asked for access this service does not offer.',
  invalid_target: "The assistant asked for access to something other than this service's MCP endpoint.",
  login_required:
    'The assistant asked to connect without you signing in; connecting always needs you to sign in and allow it.',
  consent_required:
    'The assistant asked to connect without asking you; connecting always needs you to sign in and allow it.',
  interaction_required:
    'The assistant asked to connect without showing you any page; connecting always needs you to sign in and allow it.',
  request_not_supported: 'The assistant sent its request in a form this service does not accept.',
  request_uri_not_supported: 'The assistant sent its request in a form this service does not accept.',
  registration_not_supported: 'The assistant sent its request in a form this service does not accept.',
  temporarily_unavailable: 'Too many connection requests came in just now. Wait a little, then try again.',
  server_error: 'Something went wrong on our side. Try again in a moment.',
};

type ErrorOut = { error?: unknown; error_description?: unknown };

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

/** The error page: its HTML for an OAuth error (`{error, error_description}`; `state` is never shown), and its headers. */
export type ErrorPage = {
  html(out: ErrorOut): string;
  /** The headers every page of this service carries (never cached, never framed, no scripts). */
  headers: Readonly<Record<string, string>>;
};

/** The error page in the web pages' layout. */
export function errorPageOf(pages: Pick<PageKit, 'standalone' | 'headers'>): ErrorPage {
  return {
    html: (out) => authorizationErrorPage(pages, out),
    headers: { ...pages.headers, 'cache-control': 'no-store' },
  };
}

function authorizationErrorPage(pages: Pick<PageKit, 'standalone'>, out: ErrorOut): string {
  const code = text(out.error) || 'error';
  const description = text(out.error_description);
  const plainly = PLAINLY[code] ?? 'The assistant sent a request this service cannot accept.';
  return pages.standalone({
    title: 'Could not connect',
    body: html`<div class="card">
<h1>The assistant's request could not be completed</h1>
<p>${plainly}</p>
<p>Go back to your assistant and start connecting again. If this keeps happening, tell the assistant's maker what it says below.</p>
<p class="muted"><code>${code}</code>${description ? html`: ${description}` : ''}</p>
</div>`,
  });
}
