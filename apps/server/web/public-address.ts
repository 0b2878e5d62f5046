import type { FastifyInstance } from 'fastify';

/*
 * The pages live at PUBLIC_URL: their forms are checked against its origin (csrf.ts), their cookies
 * are its host's. A browser that reached this server by another name of it (http://127.0.0.1:3000 for
 * http://localhost:3000, the machine's address on the network) would be shown forms it cannot send
 * ("This form has expired"): a GET or HEAD of a page is sent to the same path and query on PUBLIC_URL
 * instead, before any form is shown.
 */

/**
 * Addresses that are not pages, never redirected: what programs call (the API, MCP, the authorization
 * server's endpoints and metadata) at the address they were given, which a redirect would make them
 * follow without their `Authorization` header, or not at all; the probes and metrics, which a load
 * balancer or Prometheus asks of each instance at its own address and which must answer there; the
 * API reference, the media files, the icon, the stylesheet and scripts, which hold no form and no
 * session and load from whichever address the page is on.
 */
export function notAPage(path: string): boolean {
  return (
    /^\/(api|mcp|docs|healthz|readyz|metrics|media|web)(\/|$)/.test(path) ||
    path.startsWith('/.well-known/') ||
    path.startsWith('/favicon.') ||
    (path.startsWith('/oauth/') && !path.startsWith('/oauth/interaction/'))
  );
}

/**
 * Sends a GET or HEAD of a page for another host than PUBLIC_URL's to the same path and query on
 * PUBLIC_URL (307). Only a request that came in on the port PUBLIC_URL names, that is straight from
 * the browser to this server: a proxy in front connects to the service's own port, never PUBLIC_URL's,
 * so what it forwards is never redirected, whatever `Host` it sends, and cannot loop.
 */
export function installPublicAddress(app: FastifyInstance, publicUrl: string): void {
  const target = new URL(publicUrl);
  const port = Number(target.port || (target.protocol === 'https:' ? 443 : 80));
  const sameHost = (host: string): boolean => {
    try {
      return new URL(`${target.protocol}//${host}`).host === target.host;
    } catch {
      // Not a host at all: nothing to redirect to it, the request goes on to be refused or served.
      return true;
    }
  };
  app.addHook('onRequest', (request, reply, done) => {
    const host = request.headers.host;
    if (
      (request.method !== 'GET' && request.method !== 'HEAD') ||
      request.socket.localPort !== port ||
      !host ||
      sameHost(host) ||
      !request.url.startsWith('/') ||
      notAPage(request.url.split('?')[0] ?? '')
    ) {
      done();
      return;
    }
    reply.header('cache-control', 'no-store').redirect(`${target.origin}${request.url}`, 307);
  });
}
