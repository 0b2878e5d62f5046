import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';

export type TokenProxy = {
  /** The proxy's own address (`http://127.0.0.1:<port>`). */
  url: string;
  /** Where requests go: the app's address. Set once the app listens. */
  forwardTo(url: string): void;
  close(): Promise<void>;
};

/**
 * TEST ONLY. A local HTTP proxy that forwards every request to the app unchanged except for an
 * `Authorization: Bearer <token>` it adds: the MCP conformance suite's client cannot send headers, and
 * /mcp has (and must have) no way in without a real token. The token is one the test's verifier knows;
 * the product has no bypass.
 */
export async function startTokenProxy(token: string): Promise<TokenProxy> {
  let target: URL | null = null;
  const server = createServer((incoming, outgoing) => {
    if (!target) {
      outgoing.writeHead(503).end('no target yet');
      return;
    }
    const upstream = request(
      new URL(incoming.url ?? '/', target),
      { method: incoming.method, headers: { ...incoming.headers, authorization: `Bearer ${token}` } },
      (answer) => {
        outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(outgoing);
      },
    );
    upstream.on('error', () => {
      if (!outgoing.headersSent) outgoing.writeHead(502);
      outgoing.end();
    });
    incoming.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    forwardTo(url) {
      target = new URL(url);
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
