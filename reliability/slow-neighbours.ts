import { randomUUID } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ACCOUNT_SHARE } from '../apps/application/webhook-delivery.ts';
import { WEBHOOK_ENDPOINTS_MAX } from '../domain/vocabulary.ts';
import { createTestDatabase } from '../tests/support/db.ts';
import { makeCertificate } from '../tests/support/media.ts';
import { startServer } from '../tests/support/server.ts';
import { dropRedisPrefix, REDIS_URL, startReceiver, until } from './crash-support.ts';
import { articleIds, migrateAndSeed, startLoad } from './outage-load.ts';
import { type Check, check, type Scenario } from './scenario.ts';

/*
 * Scenario 5: slow and failing neighbours. While a normal client reads and edits articles, five
 * neighbours misbehave at once: a webhook endpoint that accepts the connection and never answers,
 * another account whose 10 webhook endpoints all do the same while it edits, an image host that sends
 * its headers and then a byte now and then, clients that ask for large answers and read them a
 * kilobyte at a time, and a crowd of connections that open and say nothing. Promised: none of them
 * holds a worker, a pool connection or memory beyond its bound: the normal client is answered, the
 * hanging endpoints' attempts end at 10 s while another endpoint keeps receiving (the other account
 * holds at most its share of the webhook workers, ACCOUNT_SHARE), the trickled image is given up at
 * its 10 s deadline (422 image_fetch_failed), the server's memory stays bounded under the slow
 * readers, and the idle connections are let go once their clients close them.
 */

/** The image host: HTTPS on a loopback address of its own, trusted through MEDIA_FETCH_CA_FILE. */
const IMAGE_HOST = '127.0.0.2';
/** How far the server's resident memory may grow over its start while the neighbours misbehave. */
const RSS_BOUND_MB = 160;
/** How many requests each slow reader sends at once (pipelined) before reading slowly. */
const PIPELINED = 3;

/** The resident memory of a process (VmRSS of /proc/<pid>/status), in MiB. */
async function rssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN);
  return Math.round(kb / 102.4) / 10;
}

/** How many file descriptors (sockets included) a process holds open. */
async function openFds(pid: number): Promise<number> {
  return (await readdir(`/proc/${pid}/fd`)).length;
}

/** Closes a server and every connection it holds. */
function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
}

/** Opens a TCP connection to `port` on loopback. */
function open(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port }, () => resolve(socket));
    socket.once('error', reject);
  });
}

/**
 * A client that pipelines `requests` GETs of `path` and then reads the answers `chunk` bytes every
 * `everyMs`; the bytes it has read so far.
 */
function slowReader(
  port: number,
  path: string,
  key: string,
  requests: number,
): { read: () => number; close: () => void } {
  let read = 0;
  let stopped = false;
  const socket = connect({ host: '127.0.0.1', port });
  socket.on('error', () => {});
  const request = `GET ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${key}\r\n\r\n`;
  socket.on('connect', () => {
    socket.write(request.repeat(requests));
    socket.pause();
    const tick = (): void => {
      if (stopped) return;
      const chunk = socket.read(1024) as Buffer | null;
      if (chunk) read += chunk.length;
      setTimeout(tick, 100);
    };
    tick();
  });
  return {
    read: () => read,
    close: () => {
      stopped = true;
      socket.destroy();
    },
  };
}

export const slowNeighbours: Scenario = {
  name: 'slow-neighbours',
  title: 'a hanging webhook endpoint, a trickling image host, slow readers and idle connections',
  timeoutMs: 4 * 60_000,
  async run({ short, log }) {
    const phaseMs = short ? 14_000 : 40_000;
    const idleSockets = short ? 500 : 1000;
    const slowReaders = short ? 10 : 30;
    const checks: Check[] = [];
    const figures: Record<string, string | number> = {};
    const dir = await mkdtemp(join(tmpdir(), 'rel-neighbours-'));
    const prefix = `rel-nb-${randomUUID().slice(0, 8)}`;
    const test = await createTestDatabase('postgres');
    makeCertificate(dir, IMAGE_HOST);

    // The neighbours' servers: one that never answers, one that answers, one that trickles. The one
    // that never answers counts the other account's requests open at once (/neighbour/...).
    const hanging: Socket[] = [];
    let neighbourOpen = 0;
    let neighbourMostOpen = 0;
    const hang: Server = createHttpServer((req) => {
      hanging.push(req.socket);
      if (!req.url?.startsWith('/neighbour/')) return;
      neighbourOpen++;
      neighbourMostOpen = Math.max(neighbourMostOpen, neighbourOpen);
      req.socket.once('close', () => {
        neighbourOpen--;
      });
    });
    await new Promise<void>((r) => hang.listen(0, '127.0.0.1', r));
    const hangOrigin = `http://127.0.0.1:${(hang.address() as { port: number }).port}`;
    const hangUrl = `${hangOrigin}/hooks`;
    const good = await startReceiver();
    const goodArrivals: number[] = [];
    const trickles: NodeJS.Timeout[] = [];
    const images = createHttpsServer(
      { key: await readFile(join(dir, 'key.pem')), cert: await readFile(join(dir, 'cert.pem')) },
      (_req, res) => {
        res.writeHead(200, { 'content-type': 'image/png' });
        res.write(Buffer.from([0x89]));
        trickles.push(setInterval(() => res.write(Buffer.from([0x50])), 500));
      },
    );
    await new Promise<void>((r) => images.listen(0, IMAGE_HOST, r));
    const trickleUrl = `https://${IMAGE_HOST}:${(images.address() as { port: number }).port}/slow.png`;

    const env = {
      DATABASE_URL: test.databaseUrl as string,
      DATA_DIR: dir,
      REDIS_URL,
      JOBS_PREFIX: prefix,
      RATE_LIMIT_KEY_PREFIX: `${prefix}:rl`,
      RATE_LIMIT_PER_MINUTE: '1000000',
      EDIT_LIMIT_PER_DAY: '1000000',
      MEDIA_FETCH_CA_FILE: join(dir, 'cert.pem'),
      OUTBOUND_ALLOW_NETWORKS: `127.0.0.1/32,${IMAGE_HOST}/32`,
    };
    const seeded = await migrateAndSeed(env, 40);
    const neighbour = await migrateAndSeed(env, 5);
    const server = await startServer(env);
    const pid = server.child.pid as number;
    const port = Number(new URL(server.url).port);
    const idle: Socket[] = [];
    const readers: Array<ReturnType<typeof slowReader>> = [];
    try {
      const key = seeded.api_key;
      const siteId = seeded.sites[0]?.id as string;
      const ids = await articleIds(server.url, key, siteId);
      const createHook = async (url: string, as = key): Promise<string> => {
        const res = await fetch(`${server.url}/api/v1/webhooks`, {
          method: 'POST',
          headers: { authorization: `Bearer ${as}`, 'content-type': 'application/json' },
          body: JSON.stringify({ url, events: ['article.updated'] }),
        });
        if (res.status !== 201)
          throw new Error(`creating a webhook answered ${res.status}: ${await res.text()}`);
        return ((await res.json()) as { id: string }).id;
      };
      const hangId = await createHook(hangUrl);
      const goodId = await createHook(good.url);
      // The other account: every endpoint it may have, all hanging.
      for (let i = 0; i < WEBHOOK_ENDPOINTS_MAX; i++) {
        await createHook(`${hangOrigin}/neighbour/${i}`, neighbour.api_key);
      }
      const neighbourIds = await articleIds(server.url, neighbour.api_key, neighbour.sites[0]?.id as string);
      // Warm the server (first requests compile, connect and size the heap), then take its resting figures.
      const warm = startLoad({
        baseUrl: server.url,
        key,
        articleIds: ids,
        clients: 4,
        timeoutMs: 10_000,
        pauseMs: 0,
        label: 'warm',
        edits: false,
      });
      for (let i = 0; i < 40; i++)
        await (
          await fetch(
            `${server.url}/api/v1/sites/${siteId}/articles?from=2000-01-01&to=2100-01-01&per_page=100`,
            { headers: { authorization: `Bearer ${key}` } },
          )
        ).text();
      await warm.stop();
      const rssStart = await rssMb(pid);
      const fdsStart = await openFds(pid);
      figures['server RSS at rest (MiB)'] = rssStart;
      figures['server fds at rest'] = fdsStart;
      log(`at rest: RSS ${rssStart} MiB, ${fdsStart} fds`);

      const phaseStarted = Date.now();
      // The other account edits an article every 2 s or so: a message for each of its 10 endpoints.
      const neighbourLoad = startLoad({
        baseUrl: server.url,
        key: neighbour.api_key,
        articleIds: neighbourIds,
        clients: 1,
        timeoutMs: 10_000,
        pauseMs: 1_000,
        label: 'neighbour',
      });
      const load = startLoad({
        baseUrl: server.url,
        key,
        articleIds: ids,
        clients: 4,
        timeoutMs: 10_000,
        pauseMs: 100,
        label: 'normal',
      });
      good.ids.length = 0;
      const arrivalsBefore = good.ids.length;
      const arrivalWatch = setInterval(() => {
        while (goodArrivals.length < good.ids.length - arrivalsBefore) goodArrivals.push(Date.now());
      }, 50);

      // The idle crowd: connections that open and say nothing; half of them start a request and stop.
      for (let i = 0; i < idleSockets; i++) {
        const socket = await open(port).catch(() => null);
        if (!socket) continue;
        socket.on('error', () => {});
        if (i % 2 === 1) socket.write('GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n');
        idle.push(socket);
      }
      log(`${idle.length} idle connections open`);
      // The slow readers: each asks for a few pages of 40 articles at once and reads 10 KB a second.
      const listPath = `/api/v1/sites/${siteId}/articles?from=2000-01-01&to=2100-01-01&per_page=100`;
      for (let i = 0; i < slowReaders; i++) readers.push(slowReader(port, listPath, key, PIPELINED));
      // The trickling image: two requests at once, each timed.
      const trickled = Array.from({ length: 2 }, async () => {
        const started = performance.now();
        const res = await fetch(`${server.url}/api/v1/articles/${ids[0]}/featured-image`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ url: trickleUrl, alt: 'slow' }),
          signal: AbortSignal.timeout(30_000),
        });
        const body = (await res.json()) as { code?: string };
        return { status: res.status, code: body.code, ms: Math.round(performance.now() - started) };
      });

      let rssPeak = rssStart;
      let fdsPeak = fdsStart;
      while (Date.now() - phaseStarted < phaseMs) {
        rssPeak = Math.max(rssPeak, await rssMb(pid));
        fdsPeak = Math.max(fdsPeak, await openFds(pid));
        await new Promise((r) => setTimeout(r, 250));
      }
      const images422 = await Promise.all(trickled);
      await load.stop();
      await neighbourLoad.stop();
      clearInterval(arrivalWatch);
      const phaseEnded = Date.now();
      figures['server RSS peak (MiB)'] = rssPeak;
      figures['server fds peak'] = fdsPeak;
      figures['bytes read by the slow readers'] = readers.reduce((n, r) => n + r.read(), 0);
      log(`peak: RSS ${rssPeak} MiB, ${fdsPeak} fds`);

      // The normal client.
      const answers = load.answers;
      const bad = answers.filter((a) => a.status !== 200);
      const sorted = answers.map((a) => a.ms).sort((a, b) => a - b);
      const p99 = Math.round(sorted[Math.floor(sorted.length * 0.99)] ?? Number.NaN);
      const max = Math.round(sorted.at(-1) ?? Number.NaN);
      figures['normal calls'] = answers.length;
      figures['normal p99 / max (ms)'] = `${p99} / ${max}`;
      checks.push(
        check(
          'the normal client is answered 200 on every call while the neighbours misbehave',
          answers.length > 20 && bad.length === 0,
          `${answers.length} calls, ${bad.length} not 200: ${bad
            .slice(0, 3)
            .map((a) => `${a.status} ${a.body.slice(0, 120)}`)
            .join('; ')}`,
        ),
      );
      checks.push(
        check(
          'its latency stays bounded (p99 under 2 s, none over 5 s)',
          p99 < 2_000 && max < 5_000,
          `p99 ${p99} ms, max ${max} ms`,
        ),
      );

      // The trickled image.
      checks.push(
        check(
          'the trickled image is given up at its 10 s deadline with 422 image_fetch_failed',
          images422.every(
            (r) => r.status === 422 && r.code === 'image_fetch_failed' && r.ms >= 9_500 && r.ms < 14_000,
          ),
          images422.map((r) => `${r.status} ${r.code} in ${r.ms} ms`).join(', '),
        ),
      );
      figures['trickled image answered after (ms)'] = images422.map((r) => r.ms).join(', ');

      // The webhooks: the hanging endpoint's attempts end at 10 s, the other endpoint keeps receiving.
      const edits = answers.filter((a) => a.method === 'PUT' && a.status === 200).length;
      await until(() => good.ids.length >= edits, 15_000);
      const attempts = await test.handle.db
        .selectFrom('webhook_attempts')
        .innerJoin('webhook_deliveries', 'webhook_deliveries.id', 'webhook_attempts.delivery_id')
        .select([
          'webhook_deliveries.endpoint_id',
          'webhook_attempts.duration_ms',
          'webhook_attempts.status_code',
          'webhook_attempts.error',
        ])
        .execute();
      const neighbourHooks = await test.handle.db
        .selectFrom('webhook_endpoints')
        .select('id')
        .where('account_id', '=', neighbour.account_id)
        .execute();
      const neighbourAttempts = attempts.filter((a) => neighbourHooks.some((h) => h.id === a.endpoint_id));
      const hangAttempts = attempts.filter((a) => a.endpoint_id === hangId);
      const goodAttempts = attempts.filter((a) => a.endpoint_id === goodId);
      figures['hanging endpoint attempts (ms)'] = hangAttempts.map((a) => a.duration_ms).join(', ');
      figures["other account's edits / attempts at its hanging endpoints"] =
        `${neighbourLoad.answers.filter((a) => a.method === 'PUT' && a.status === 200).length} / ${neighbourAttempts.length}`;
      figures["other account's requests open at once, at most"] = neighbourMostOpen;
      checks.push(
        check(
          `the other account's hanging endpoints hold at most its share of the webhook workers (${ACCOUNT_SHARE} sends at once)`,
          neighbourMostOpen > 0 && neighbourMostOpen <= ACCOUNT_SHARE,
          `at most ${neighbourMostOpen} open at once, ${neighbourAttempts.length} attempts ended`,
        ),
      );
      checks.push(
        check(
          "the hanging endpoint's attempts end at its 10 s timeout, without an answer",
          hangAttempts.length > 0 &&
            hangAttempts.every(
              (a) => a.status_code === null && a.duration_ms >= 9_500 && a.duration_ms < 13_000,
            ),
          hangAttempts
            .map((a) => `${a.duration_ms} ms ${a.error}`)
            .slice(0, 4)
            .join('; '),
        ),
      );
      const deliveries = await test.handle.db
        .selectFrom('webhook_deliveries')
        .select(['created_at', 'delivered_at'])
        .where('endpoint_id', '=', goodId)
        .execute();
      const lags = deliveries
        .filter((d) => d.delivered_at !== null)
        .map((d) => (d.delivered_at as Date).getTime() - d.created_at.getTime())
        .sort((a, b) => a - b);
      const lagMax = lags.at(-1) ?? Number.NaN;
      figures['other endpoint deliveries / slowest (ms)'] = `${lags.length} of ${edits} / ${lagMax}`;
      checks.push(
        check(
          'the other endpoint receives every edit, none of them held behind the hanging ones (each within 8 s)',
          edits > 0 &&
            good.ids.length >= edits &&
            lags.length >= edits &&
            lagMax < 8_000 &&
            goodAttempts.every((a) => a.status_code === 204),
          `${edits} edits, ${good.ids.length} received, ${lags.length} delivered, slowest ${lagMax} ms`,
        ),
      );
      checks.push(
        check(
          'the other endpoint received during the phase, not only after it',
          goodArrivals.filter((t) => t < phaseEnded).length > 0,
          `${goodArrivals.filter((t) => t < phaseEnded).length} during the phase`,
        ),
      );

      // Memory and connections.
      checks.push(
        check(
          `the server's memory stays within ${RSS_BOUND_MB} MiB of its rest under slow readers and idle connections`,
          rssPeak - rssStart < RSS_BOUND_MB,
          `rest ${rssStart} MiB, peak ${rssPeak} MiB`,
        ),
      );
      checks.push(
        check(
          'the idle connections were all accepted and held while open',
          fdsPeak - fdsStart >= idle.length * 0.9,
          `${idle.length} opened, fds ${fdsStart} -> ${fdsPeak}`,
        ),
      );
      for (const r of readers) r.close();
      for (const s of idle) s.destroy();
      const released = await until(async () => (await openFds(pid)) <= fdsStart + 20, 10_000);
      const fdsAfter = await openFds(pid);
      figures['server fds after they closed'] = fdsAfter;
      checks.push(
        check(
          'once the clients close, the server lets their connections go (fds back to rest)',
          released,
          `rest ${fdsStart}, after ${fdsAfter}`,
        ),
      );
      const after = await fetch(`${server.url}/api/v1/articles/${ids[1]}`, {
        headers: { authorization: `Bearer ${key}` },
      });
      checks.push(
        check('the server still answers afterwards', after.status === 200, `status ${after.status}`),
      );
      figures['server RSS afterwards (MiB)'] = await rssMb(pid);
      return {
        done:
          `${phaseMs / 1000} s of a normal client (4 loops reading and editing) while a webhook endpoint ` +
          `never answers, another account edits every 2 s with its ${WEBHOOK_ENDPOINTS_MAX} endpoints never answering, ` +
          `an image host trickles a byte every 0.5 s, ${slowReaders} clients pipeline ${PIPELINED} ` +
          `article lists each and read 10 KB/s, and ${idle.length} connections sit idle`,
        checks,
        figures,
      };
    } finally {
      for (const r of readers) r.close();
      for (const s of idle) s.destroy();
      for (const t of trickles) clearInterval(t);
      await server.stop().catch(() => null);
      images.closeAllConnections();
      images.close();
      for (const s of hanging) s.destroy();
      await closeServer(hang);
      await good.close();
      await test.drop().catch(() => {});
      await dropRedisPrefix(prefix).catch(() => {});
      await rm(dir, { recursive: true, force: true });
    }
  },
};
