import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DomainError, type ErrorCode } from '../../domain/errors.ts';
import {
  createImageFetcher,
  type FetchImage,
  type HostLookup,
  isPublicAddress,
} from '../../infra/media/fetch.ts';
import { inspectImage } from '../../infra/media/image.ts';

/*
 * How these tests reach a server on 127.0.0.1 although the fetcher refuses loopback: the fetcher has two
 * options that exist for this (and for private deployments), and only the tests pass them.
 *
 * - `lookup` replaces DNS: it maps the made-up names `*.test.example` to 127.0.0.1 (or to whatever a case
 *   needs: a private address, a rebinding answer). Its answers are checked exactly like real DNS answers.
 * - `allowAddresses` replaces the "public only" rule. The success cases allow 127.0.0.1 and public
 *   addresses (`ip === '127.0.0.1' || isPublicAddress(ip)`), nothing else, so a redirect from the test
 *   server to a private or link-local address is still refused. The refusal cases use the default rule.
 * - `ca` trusts the certificate generated here (openssl, for images.test.example and hop.test.example):
 *   certificate and hostname verification stay on.
 *
 * Every refusal case points at the real test server's port, so a check that failed open would connect
 * and succeed instead of being refused; the server counts connections to prove none was made.
 */

const HOSTS: Record<string, string[]> = {
  'images.test.example': ['127.0.0.1'],
  'hop.test.example': ['127.0.0.1'],
  'wrong.test.example': ['127.0.0.1'], // not in the certificate
  'internal.test.example': ['10.0.0.5'],
  'metadata.test.example': ['169.254.169.254'],
  'mixed.test.example': ['93.184.215.14', '127.0.0.1'],
  'loopback6.test.example': ['::1'],
  'nothing.test.example': [],
};

const testLookup: HostLookup = async (hostname) => {
  const answer = HOSTS[hostname];
  if (!answer) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
  return answer;
};

const allowLocalTestServer = (ip: string): boolean => ip === '127.0.0.1' || isPublicAddress(ip);

/** The one detail of a refused address, whether the host did not resolve or resolved to a non-public address. */
const UNREACHABLE = /^The image could not be fetched from that address;/;

let workDir: string;
let ca: Buffer;
let server: Server;
let port: number;
let png: Buffer;
let connections = 0;
const bodyClosedEarly: string[] = [];

function url(pathname: string, host = 'images.test.example'): string {
  return `https://${host}:${port}${pathname}`;
}

async function refusal(promise: Promise<unknown>): Promise<DomainError> {
  try {
    const result = await promise;
    throw new Error(
      `not refused: ${result instanceof Uint8Array ? `${result.length} bytes` : String(result)}`,
    );
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    return error;
  }
}

async function expectRefused(
  promise: Promise<unknown>,
  code: ErrorCode,
  detail?: RegExp,
): Promise<DomainError> {
  const error = await refusal(promise);
  expect(error.code, error.message).toBe(code);
  if (detail) expect(error.message).toMatch(detail);
  return error;
}

beforeAll(async () => {
  workDir = await mkdtemp(path.join(tmpdir(), 'media-fetch-'));
  const key = path.join(workDir, 'key.pem');
  const cert = path.join(workDir, 'cert.pem');
  execFileSync(
    'openssl',
    [
      ...['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'],
      ...['-keyout', key, '-out', cert, '-days', '2', '-subj', '/CN=images.test.example'],
      ...['-addext', 'subjectAltName=DNS:images.test.example,DNS:hop.test.example'],
    ],
    { stdio: 'ignore' },
  );
  ca = await readFile(cert);
  png = await sharp({ create: { width: 16, height: 9, channels: 3, background: '#36c' } })
    .png()
    .toBuffer();

  server = createServer({ key: await readFile(key), cert: ca }, (req, res) => {
    const where = new URL(req.url ?? '/', 'https://images.test.example');
    const step = where.pathname.split('/');
    res.on('close', () => {
      if (!res.writableFinished) bodyClosedEarly.push(where.pathname);
    });
    switch (step[1]) {
      case 'image.png':
        res.writeHead(200, { 'content-type': 'image/png', 'content-length': png.length }).end(png);
        return;
      case 'chunked.png':
        res.writeHead(200, { 'content-type': 'image/png' });
        res.write(png.subarray(0, 10));
        res.end(png.subarray(10));
        return;
      case 'redirect': {
        // /redirect/N answers with a redirect N times, then the image.
        const left = Number(step[2]);
        if (left === 0) res.writeHead(302, { location: '/image.png' }).end();
        else res.writeHead(301, { location: `/redirect/${left - 1}` }).end();
        return;
      }
      case 'to':
        res.writeHead(307, { location: where.searchParams.get('location') ?? '' }).end();
        return;
      case 'no-location':
        res.writeHead(302).end();
        return;
      case 'missing':
        res.writeHead(404, { 'content-type': 'text/plain' }).end('not here');
        return;
      case 'stall':
        return; // never answers
      case 'drip': {
        res.writeHead(200, { 'content-type': 'image/png' });
        res.write(png.subarray(0, 8));
        const timer = setInterval(() => res.write(Buffer.alloc(1)), 100);
        res.on('close', () => clearInterval(timer));
        return;
      }
      case 'endless': {
        // A chunked body (no Content-Length) that never ends: 16 KiB at a time.
        res.writeHead(200, { 'content-type': 'image/png' });
        const pump = (): void => {
          while (!res.destroyed && res.write(Buffer.alloc(16 * 1024, 1))) {
            /* until the socket pushes back */
          }
        };
        res.on('drain', pump);
        pump();
        return;
      }
      case 'declares-huge':
        res.writeHead(200, { 'content-type': 'image/png', 'content-length': 50 * 1024 * 1024 });
        res.write(png);
        return;
      case 'understates': {
        // Content-Length says 100 bytes; 1 MiB follows (written raw: node's http would refuse to lie).
        req.socket.write('HTTP/1.1 200 OK\r\ncontent-type: image/png\r\ncontent-length: 100\r\n\r\n');
        req.socket.end(Buffer.alloc(1024 * 1024, 2));
        return;
      }
      case 'cut-short':
        // Content-Length says the whole image; the connection closes half-way.
        req.socket.write(
          `HTTP/1.1 200 OK\r\ncontent-type: image/png\r\ncontent-length: ${png.length}\r\n\r\n`,
        );
        req.socket.end(png.subarray(0, 20));
        return;
      default:
        res.writeHead(404).end();
    }
  });
  server.on('secureConnection', () => {
    connections++;
  });
  server.on('connection', (socket) => {
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  await rm(workDir, { recursive: true, force: true });
});

beforeEach(() => {
  connections = 0;
  bodyClosedEarly.length = 0;
});

/** The fetcher the success cases use: test DNS, the test CA, and 127.0.0.1 allowed besides public addresses. */
function testFetcher(extra: Parameters<typeof createImageFetcher>[0] = {}): FetchImage {
  return createImageFetcher({ ca, lookup: testLookup, allowAddresses: allowLocalTestServer, ...extra });
}

/** The production rule (public addresses only), with test DNS and the test CA. */
function defaultRuleFetcher(extra: Parameters<typeof createImageFetcher>[0] = {}): FetchImage {
  return createImageFetcher({ ca, lookup: testLookup, ...extra });
}

describe('isPublicAddress', () => {
  it.each([
    // public
    ['8.8.8.8', true],
    ['93.184.215.14', true],
    ['1.1.1.1', true],
    ['2606:4700:4700::1111', true],
    ['2a00:1450:4001:82a::200e', true],
    ['::ffff:8.8.8.8', true], // IPv4-mapped: the embedded address decides
    ['64:ff9b::808:808', true], // NAT64 of 8.8.8.8
    ['2002:808:808::1', true], // 6to4 of 8.8.8.8
    // IPv4 special-purpose
    ['0.0.0.0', false],
    ['0.1.2.3', false],
    ['10.0.0.1', false],
    ['10.255.255.255', false],
    ['100.64.0.1', false],
    ['100.127.255.254', false],
    ['127.0.0.1', false],
    ['127.255.255.254', false],
    ['169.254.169.254', false],
    ['172.16.0.1', false],
    ['172.31.255.255', false],
    ['192.0.0.1', false],
    ['192.0.2.1', false],
    ['192.88.99.1', false],
    ['192.168.1.1', false],
    ['198.18.0.1', false],
    ['198.19.255.255', false],
    ['198.51.100.7', false],
    ['203.0.113.9', false],
    ['224.0.0.1', false],
    ['239.255.255.250', false],
    ['240.0.0.1', false],
    ['255.255.255.255', false],
    // just outside the private blocks: public
    ['172.15.255.255', true],
    ['172.32.0.1', true],
    ['100.63.255.255', true],
    ['100.128.0.1', true],
    ['11.0.0.1', true],
    // IPv6
    ['::', false],
    ['::1', false],
    ['fe80::1', false],
    ['fe80::1%eth0', false],
    ['febf::1', false],
    ['fec0::1', false], // deprecated site-local
    ['fc00::1', false],
    ['fd12:3456:789a::1', false],
    ['ff02::1', false],
    ['2001:db8::1', false],
    ['3fff::1', false],
    ['2001::1', false], // Teredo
    ['2001:2::1', false], // benchmarking
    ['::ffff:127.0.0.1', false],
    ['::ffff:7f00:1', false],
    ['::ffff:169.254.169.254', false],
    ['::ffff:10.0.0.1', false],
    ['::127.0.0.1', false], // IPv4-compatible (deprecated)
    ['::8.8.8.8', false],
    ['64:ff9b::7f00:1', false], // NAT64 of 127.0.0.1
    ['64:ff9b::a9fe:a9fe', false], // NAT64 of 169.254.169.254
    ['64:ff9b::a00:1', false], // NAT64 of 10.0.0.1
    ['64:ff9b:1::808:808', false], // local-use NAT64 prefix
    ['2002:7f00:1::1', false], // 6to4 of 127.0.0.1
    ['2002:a00:1::', false], // 6to4 of 10.0.0.1
    ['100::1', false], // discard-only
    // not addresses at all
    ['', false],
    ['localhost', false],
    ['127.1', false],
    ['2130706433', false],
    ['0x7f.0.0.1', false],
    ['::ffff:999.0.0.1', false],
  ])('%s -> %s', (ip, expected) => {
    expect(isPublicAddress(ip)).toBe(expected);
  });
});

describe('fetching an image from a local HTTPS server', () => {
  it('fetches the bytes over https, with the hostname verified against the certificate', async () => {
    const bytes = await testFetcher()(url('/image.png'));
    expect(Buffer.from(bytes)).toEqual(png);
    expect(await inspectImage(bytes)).toMatchObject({ format: 'png', width: 16, height: 9 });
    expect(await testFetcher()(url('/chunked.png'))).toEqual(new Uint8Array(png));
  });

  it('refuses a certificate it was not told to trust (verification is on)', async () => {
    const noCa = createImageFetcher({ lookup: testLookup, allowAddresses: allowLocalTestServer });
    await expectRefused(noCa(url('/image.png')), 'image_fetch_failed', /certificate/);
  });

  it('refuses a certificate for another name (SNI and verification use the hostname, not the IP)', async () => {
    await expectRefused(
      testFetcher()(url('/image.png', 'wrong.test.example')),
      'image_fetch_failed',
      /certificate/,
    );
  });

  it('follows up to 3 redirects, each one checked', async () => {
    expect(await testFetcher()(url('/redirect/2'))).toEqual(new Uint8Array(png)); // 3 redirects in all
    const hop = `https://hop.test.example:${port}/image.png`;
    expect(await testFetcher()(url(`/to?location=${encodeURIComponent(hop)}`))).toEqual(new Uint8Array(png));
  });

  it('resolves each host once and connects to the address it checked (no DNS rebinding)', async () => {
    // A rebinding DNS: the first answer is allowed, every later one points elsewhere.
    let calls = 0;
    const rebinding: HostLookup = async () => (++calls === 1 ? ['127.0.0.1'] : ['10.0.0.1']);
    const fetchImage = createImageFetcher({ ca, lookup: rebinding, allowAddresses: allowLocalTestServer });
    expect(await fetchImage(url('/redirect/1'))).toEqual(new Uint8Array(png));
    expect(calls).toBe(1);
  });
});

describe('refusing what it must not fetch', () => {
  it('refuses a hostname that resolves to loopback, without connecting', async () => {
    await expectRefused(defaultRuleFetcher()(url('/image.png')), 'image_fetch_failed', UNREACHABLE);
    await expectRefused(
      defaultRuleFetcher()(url('/image.png', 'loopback6.test.example')),
      'image_fetch_failed',
      UNREACHABLE,
    );
    expect(connections).toBe(0);
  });

  it('refuses when any resolved address is not public', async () => {
    await expectRefused(
      defaultRuleFetcher()(url('/image.png', 'mixed.test.example')),
      'image_fetch_failed',
      UNREACHABLE,
    );
    expect(connections).toBe(0);
  });

  it('normalises numeric hosts with the WHATWG URL parser before checking them', () => {
    expect(new URL('https://127.1/').hostname).toBe('127.0.0.1');
    expect(new URL('https://2130706433/').hostname).toBe('127.0.0.1');
    expect(new URL('https://0x7f.1/').hostname).toBe('127.0.0.1');
    expect(new URL('https://[::ffff:169.254.169.254]/').hostname).toBe('[::ffff:a9fe:a9fe]');
  });

  it.each([
    '127.0.0.1',
    '127.1',
    '2130706433',
    '0x7f.1',
    '0x7f000001',
    '0177.0.0.1',
    '127.000.000.001',
    '[::1]',
    '[0:0:0:0:0:0:0:1]',
    '[::ffff:127.0.0.1]',
    '[::ffff:7f00:1]',
    '[::ffff:169.254.169.254]',
    '169.254.169.254',
    '[fe80::1]',
    '10.0.0.1',
    '172.16.0.1',
    '192.168.0.1',
    '100.64.0.1',
    '0.0.0.0',
    '0',
    '[::]',
    '224.0.0.1',
    '255.255.255.255',
    '192.0.2.1',
    '198.18.0.1',
    '[fd00::1]',
    '[fc00::1]',
    '[ff02::1]',
    '[64:ff9b::7f00:1]',
    '[64:ff9b::a9fe:a9fe]',
    '[2002:7f00:1::]',
    '[2001::1]',
    '[::127.0.0.1]',
    '[2001:db8::1]',
    'localhost',
  ])('refuses https://%s (default rule), without connecting', async (host) => {
    // The real resolver (no lookup override): numeric hosts never reach it, and localhost is loopback.
    const fetchImage = createImageFetcher({ ca });
    await expectRefused(fetchImage(`https://${host}:${port}/image.png`), 'image_fetch_failed', UNREACHABLE);
    expect(connections).toBe(0);
  });

  it('refuses schemes other than https, and URLs with credentials', async () => {
    const fetchImage = testFetcher();
    for (const target of [
      `http://images.test.example:${port}/image.png`,
      'http://169.254.169.254/latest/meta-data/',
      'ftp://images.test.example/image.png',
      'file:///etc/passwd',
      'data:image/png;base64,iVBORw0KGgo=',
      'gopher://images.test.example/',
    ]) {
      await expectRefused(fetchImage(target), 'image_fetch_failed', /only https/i);
    }
    await expectRefused(
      fetchImage(url('/image.png').replace('https://', 'https://user:pw@')),
      'image_fetch_failed',
    );
    await expectRefused(fetchImage('not a url'), 'invalid_request');
    await expectRefused(fetchImage('/image.png'), 'invalid_request');
    expect(connections).toBe(0);
  });

  it('refuses a fourth redirect', async () => {
    await expectRefused(testFetcher()(url('/redirect/3')), 'image_fetch_failed', /more than 3/);
  });

  it('refuses a redirect to a private, loopback, link-local or metadata address', async () => {
    for (const target of [
      'https://169.254.169.254/latest/meta-data/',
      `https://10.0.0.1:${port}/image.png`,
      `https://[::1]:${port}/image.png`,
      `https://[::ffff:127.0.0.2]:${port}/image.png`,
      `https://internal.test.example:${port}/image.png`,
      `https://metadata.test.example:${port}/image.png`,
    ]) {
      await expectRefused(
        testFetcher()(url(`/to?location=${encodeURIComponent(target)}`)),
        'image_fetch_failed',
        UNREACHABLE,
      );
    }
  });

  it('refuses a redirect to http, and a redirect without a Location', async () => {
    const target = `http://images.test.example:${port}/image.png`;
    await expectRefused(
      testFetcher()(url(`/to?location=${encodeURIComponent(target)}`)),
      'image_fetch_failed',
      /redirected to a http URL/,
    );
    await expectRefused(testFetcher()(url('/no-location')), 'image_fetch_failed', /without a Location/);
  });

  it('refuses an error status', async () => {
    await expectRefused(testFetcher()(url('/missing')), 'image_fetch_failed', /404/);
  });

  it('reports an unknown host as a failed fetch', async () => {
    await expectRefused(
      testFetcher()(url('/image.png', 'unknown.test.example')),
      'image_fetch_failed',
      UNREACHABLE,
    );
    await expectRefused(
      testFetcher()(url('/image.png', 'nothing.test.example')),
      'image_fetch_failed',
      UNREACHABLE,
    );
  });

  it('answers a host that does not resolve exactly as one that is not public (no probing of the network)', async () => {
    const fetchImage = createImageFetcher({ ca, lookup: testLookup });
    const unknown = await refusal(fetchImage(url('/image.png', 'unknown.test.example')));
    const empty = await refusal(fetchImage(url('/image.png', 'nothing.test.example')));
    const internal = await refusal(fetchImage(url('/image.png', 'internal.test.example')));
    const literal = await refusal(fetchImage(`https://10.0.0.5:${port}/image.png`));
    expect(unknown.message).toBe(
      'The image could not be fetched from that address; only images on the public internet can be fetched.',
    );
    for (const other of [empty, internal, literal]) {
      expect([other.code, other.message, other.errors]).toEqual([
        unknown.code,
        unknown.message,
        unknown.errors,
      ]);
    }
    // What happened is kept for the server's log, never in the answer.
    expect(String(unknown.cause)).toMatch(/could not be resolved/);
    expect(String(internal.cause)).toMatch(/10\.0\.0\.5/);
    expect(internal.message).not.toMatch(/10\.0\.0\.5|internal|private|resolved/);
    expect(connections).toBe(0);
  });
});

describe('the time and size caps', () => {
  it('gives up on a server that never answers (deadline; 10 s by default)', async () => {
    const started = performance.now();
    await expectRefused(testFetcher({ timeoutMs: 300 })(url('/stall')), 'image_fetch_failed', /within 0.3 s/);
    expect(performance.now() - started).toBeLessThan(3_000);
  });

  it('gives up on a body that trickles past the deadline', async () => {
    const started = performance.now();
    await expectRefused(testFetcher({ timeoutMs: 500 })(url('/drip')), 'image_fetch_failed', /within 0.5 s/);
    expect(performance.now() - started).toBeLessThan(3_000);
  });

  it('gives up on a resolver that never answers', async () => {
    const fetchImage = createImageFetcher({ ca, lookup: () => new Promise(() => {}), timeoutMs: 200 });
    await expectRefused(fetchImage(url('/image.png')), 'image_fetch_failed', /in time|within/);
  });

  it('stops reading a body past the cap, whatever the headers said (10 MiB by default)', async () => {
    await expectRefused(testFetcher({ maxBytes: 64 * 1024 })(url('/endless')), 'image_too_large');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(bodyClosedEarly).toContain('/endless');
  });

  it('refuses at once a Content-Length above the cap', async () => {
    await expectRefused(testFetcher({ maxBytes: 64 * 1024 })(url('/declares-huge')), 'image_too_large');
  });

  it('never reads more than an understated Content-Length, nor accepts a body cut short', async () => {
    const fetchImage = testFetcher({ maxBytes: 64 * 1024 });
    const result = await fetchImage(url('/understates')).then(
      (bytes) => bytes.length,
      (error: unknown) => error,
    );
    // Either the 100 declared bytes (which inspectImage then refuses) or a failed fetch: never 1 MiB.
    if (typeof result === 'number') expect(result).toBe(100);
    else expect((result as DomainError).code).toBe('image_fetch_failed');

    await expectRefused(fetchImage(url('/cut-short')), 'image_fetch_failed');
  });
});
