import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Metrics } from './metrics.ts';

/*
 * The metrics listener: `GET /metrics` in the Prometheus text format and `GET /readyz` with the
 * process's detailed readiness (JSON), on a port of its own (METRICS_PORT, on METRICS_HOST), never on
 * the public one. Nothing else is served there.
 */

/** The detailed readiness: 200 with `body` when ready, else 503. */
export type Readiness = () => Promise<{ ready: boolean; body: unknown }>;

export type MetricsServer = {
  /** Where Prometheus scrapes: `http://host:port/metrics`. */
  url: string;
  /** Serves `GET /readyz` from `check` from now on; until then it answers 503 `{"status":"starting"}`. */
  serveReadiness(check: Readiness): void;
  close(): Promise<void>;
};

type MetricsLogger = { error(obj: object, msg: string): void };

/** Listens on `host:port` (0: a free port, named in `url`); rejects when it cannot (a port in use). */
export async function serveMetrics(
  metrics: Pick<Metrics, 'scrape' | 'contentType'>,
  opts: { host: string; port: number; logger?: MetricsLogger },
): Promise<MetricsServer> {
  let readiness: Readiness = async () => ({ ready: false, body: { status: 'starting' } });
  const server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    if (path !== '/metrics' && path !== '/readyz') {
      response
        .writeHead(404, { 'content-type': 'text/plain; charset=utf-8' })
        .end('Not found: try /metrics or /readyz\n');
      return;
    }
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response
        .writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' })
        .end('Method not allowed\n');
      return;
    }
    if (path === '/readyz') {
      readiness().then(
        ({ ready, body }) => {
          response.writeHead(ready ? 200 : 503, {
            'content-type': 'application/json; charset=utf-8',
            'cache-control': 'no-store',
          });
          response.end(request.method === 'HEAD' ? undefined : JSON.stringify(body));
        },
        (error: unknown) => {
          opts.logger?.error({ err: error }, 'readiness: the check failed');
          response.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('The check failed\n');
        },
      );
      return;
    }
    metrics.scrape().then(
      (text) => {
        response.writeHead(200, { 'content-type': metrics.contentType, 'cache-control': 'no-store' });
        response.end(request.method === 'HEAD' ? undefined : text);
      },
      (error: unknown) => {
        opts.logger?.error({ err: error }, 'metrics: the scrape failed');
        response.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('The scrape failed\n');
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}/metrics`,
    serveReadiness(check) {
      readiness = check;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // A scraper's kept-alive connection must not hold up a shutdown.
        server.closeAllConnections();
      }),
  };
}
