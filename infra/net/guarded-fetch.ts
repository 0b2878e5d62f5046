import { lookup as systemLookup } from 'node:dns/promises';
import type { IncomingHttpHeaders } from 'node:http';
import { isIP, type Socket } from 'node:net';
import type { Readable } from 'node:stream';
import { getCACertificates } from 'node:tls';
import ipaddr from 'ipaddr.js';
import type { buildConnector } from 'undici';
import { DomainError, type ErrorCode, invalidField } from '../../domain/errors.ts';

/*
 * Fetching something from a URL a user (or a client of ours) gave us, without letting them reach anything
 * the service can reach and they cannot (SSRF). Used for featured images (infra/media/fetch.ts) and OAuth
 * client ID metadata documents (apps/server/oauth/); `createGuardedPost`, at the end, sends webhook
 * deliveries (infra/webhooks/send.ts) with the same connection checks.
 *
 * - Only `https:` URLs, parsed by the WHATWG URL parser first, so every odd spelling of a numeric host
 *   (`127.1`, `2130706433`, `0x7f.1`, `[::ffff:7f00:1]`) is already the canonical address when checked.
 * - The check lives in the connector of a private undici Agent, so it runs for every connection the
 *   fetch opens, first request and every redirect alike: the host is resolved ONCE, EVERY resolved
 *   address must pass `allowAddresses` (default: `isPublicAddress`), and the socket is opened to that very
 *   address (no second resolution an attacker's DNS could answer differently: no DNS rebinding). TLS still
 *   sends the hostname as SNI and verifies the certificate against the hostname. Once connected, the
 *   socket's remote address is checked again.
 * - Redirects are followed by hand, at most `maxRedirects`, each Location re-checked (scheme here, address
 *   in the connector). One deadline covers resolution, connections, redirects and the body; the body is
 *   counted while it streams and dropped past `maxBytes` whatever Content-Length said.
 * - No proxy from the environment is used (a private Agent), no cookies, no credentials, no decompression
 *   (`accept-encoding: identity`): the bytes returned are the bytes the server sent.
 */

/** Resolves a hostname to IP addresses (every one of them is checked). */
export type HostLookup = (hostname: string) => Promise<readonly string[]>;

export type GuardedFetchOptions = {
  /** What is fetched, in the messages: `{ one: 'image', many: 'images' }` gives "The image URL ...". */
  noun: { one: string; many: string };
  /** The code of every refusal and failure (`image_fetch_failed` for images). */
  failureCode: ErrorCode;
  /** The code of a body over `maxBytes`. */
  tooLargeCode: ErrorCode;
  /** The request's Accept header. */
  accept: string;
  userAgent: string;
  /** Largest body accepted. */
  maxBytes: number;
  /** Redirects followed (each one checked again). Default 3. */
  maxRedirects?: number;
  /** Deadline for the whole fetch, redirects and body included. Default 10 000 ms. */
  timeoutMs?: number;
  /** An extra trusted CA certificate (PEM), in addition to the roots Node trusts by default. */
  ca?: string | Buffer;
  /** Which resolved addresses may be connected to. Default: `isPublicAddress` (public unicast only). */
  allowAddresses?: (ip: string) => boolean;
  /** Hostname resolution. Default: the system resolver; whatever it answers is checked. */
  lookup?: HostLookup;
};

/** A 200 answer, its body read in full. */
type GuardedResponse = { url: string; headers: IncomingHttpHeaders; body: Uint8Array };

type GuardedFetch = (url: string) => Promise<GuardedResponse>;

/** undici, loaded by the first fetch a process makes, not by its start. */
function loadUndici(): Promise<typeof import('undici')> {
  return import('undici');
}

export const DEFAULT_MAX_REDIRECTS = 3;
export const DEFAULT_FETCH_TIMEOUT_MS = 10_000;

const MIB = 1024 * 1024;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);
/** How many resolved addresses are tried, in order, when connecting fails. */
const MAX_ADDRESSES_TRIED = 4;
/** Connection errors after which the next resolved address is tried. */
const TRY_NEXT = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
  'ETIMEDOUT',
  'UND_ERR_CONNECT_TIMEOUT',
]);

const cidrs = (list: readonly string[]): [ipaddr.IPv4 | ipaddr.IPv6, number][] =>
  list.map((c) => ipaddr.parseCIDR(c));

/** IANA special-purpose IPv4 blocks that are not public destinations (in addition to ipaddr.js's ranges). */
const BLOCKED_V4 = cidrs([
  '0.0.0.0/8', // "this network", unspecified
  '10.0.0.0/8', // private
  '100.64.0.0/10', // carrier-grade NAT
  '127.0.0.0/8', // loopback
  '169.254.0.0/16', // link-local (cloud metadata endpoints)
  '172.16.0.0/12', // private
  '192.0.0.0/24', // IETF protocol assignments
  '192.0.2.0/24', // documentation (TEST-NET-1)
  '192.88.99.0/24', // deprecated 6to4 relay anycast
  '192.168.0.0/16', // private
  '198.18.0.0/15', // benchmarking
  '198.51.100.0/24', // documentation (TEST-NET-2)
  '203.0.113.0/24', // documentation (TEST-NET-3)
  '224.0.0.0/4', // multicast
  '240.0.0.0/4', // reserved, and 255.255.255.255 broadcast
]);

/** IPv6: only global unicast (2000::/3) is public, minus these. */
const GLOBAL_V6 = ipaddr.parseCIDR('2000::/3');
const BLOCKED_V6 = cidrs([
  '2001::/23', // IETF protocol assignments: Teredo (2001::/32), benchmarking, ORCHID, ...
  '2001:db8::/32', // documentation
  '3fff::/20', // documentation (RFC 9637)
]);
const NAT64 = ipaddr.parseCIDR('64:ff9b::/96'); // well-known NAT64 prefix: IPv4 in the last 32 bits
const SIX_TO_FOUR = ipaddr.parseCIDR('2002::/16'); // 6to4: IPv4 in bits 16..47

function inAny(address: ipaddr.IPv4 | ipaddr.IPv6, list: [ipaddr.IPv4 | ipaddr.IPv6, number][]): boolean {
  return list.some((range) => address.kind() === range[0].kind() && address.match(range));
}

function isPublicV4(v4: ipaddr.IPv4): boolean {
  return v4.range() === 'unicast' && !inAny(v4, BLOCKED_V4);
}

function v4FromBytes(bytes: readonly number[]): ipaddr.IPv4 {
  return new ipaddr.IPv4([bytes[0] ?? 0, bytes[1] ?? 0, bytes[2] ?? 0, bytes[3] ?? 0]);
}

/**
 * True when `ip` (an IP address in standard notation) is a public unicast address that may be fetched
 * from. False for private, loopback, link-local, carrier-grade NAT, unspecified, multicast, broadcast,
 * documentation, benchmarking and reserved IPv4; for IPv6 anything outside global unicast 2000::/3
 * (loopback, unspecified, link-local, unique-local fc00::/7, multicast, IPv4-compatible) and the
 * documentation, benchmarking and Teredo blocks inside it. IPv6 forms that embed an IPv4 address
 * (IPv4-mapped ::ffff:a.b.c.d, NAT64 64:ff9b::/96, 6to4 2002::/16) are judged by the embedded IPv4
 * address. Anything that is not an IP address, or carries a zone (`%eth0`), is not public.
 */
export function isPublicAddress(ip: string): boolean {
  const address = parseAddress(ip);
  if (!address) return false;
  if (address.kind() === 'ipv4') return isPublicV4(address as ipaddr.IPv4);
  const v6 = address as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return isPublicV4(v6.toIPv4Address());
  const bytes = v6.toByteArray();
  if (v6.match(NAT64)) return isPublicV4(v4FromBytes(bytes.slice(12, 16)));
  if (v6.match(SIX_TO_FOUR)) return isPublicV4(v4FromBytes(bytes.slice(2, 6)));
  return v6.match(GLOBAL_V6) && !inAny(v6, BLOCKED_V6);
}

/**
 * An address in standard notation, parsed; null for anything else (or with a zone). IPv6 goes through
 * the WHATWG serializer first, which writes an embedded dotted quad in hex: ipaddr.js reads `::8.8.8.8`
 * (IPv4-compatible) as if it were `::ffff:8.8.8.8` (IPv4-mapped), the hex form it reads right.
 */
function parseAddress(ip: string): ipaddr.IPv4 | ipaddr.IPv6 | null {
  const family = isIP(ip);
  if (family === 0 || ip.includes('%')) return null;
  try {
    if (family === 4) return ipaddr.IPv4.parse(ip);
    return ipaddr.IPv6.parse(new URL(`https://[${ip}]/`).hostname.slice(1, -1));
  } catch {
    return null;
  }
}

/** The same address in one spelling (IPv4-mapped IPv6 as IPv4), to compare a socket's peer with it. */
function canonical(ip: string): string {
  const address = parseAddress(ip);
  if (!address) return ip;
  const v6 = address.kind() === 'ipv6' ? (address as ipaddr.IPv6) : null;
  return (v6?.isIPv4MappedAddress() ? v6.toIPv4Address() : address).toNormalizedString();
}

/**
 * Public addresses, plus the given networks (CIDR, e.g. `10.20.0.0/16`): for a deployment whose hosts
 * are internal (`OUTBOUND_ALLOW_NETWORKS`). Every other check (https, redirects, caps, pinning) still
 * applies. Throws on a malformed CIDR.
 */
export function allowNetworks(list: readonly string[]): (ip: string) => boolean {
  const networks = list.map((cidr) => ipaddr.parseCIDR(cidr));
  return (ip) => {
    if (isPublicAddress(ip)) return true;
    if (!ipaddr.isValid(ip)) return false;
    const address = ipaddr.process(ip);
    return networks.some(([range, bits]) => address.kind() === range.kind() && address.match(range, bits));
  };
}

async function defaultLookup(hostname: string): Promise<readonly string[]> {
  const answers = await systemLookup(hostname, { all: true, order: 'verbatim' });
  return answers.map((a) => a.address);
}

type Words = {
  failed: (detail: string) => DomainError;
  /**
   * The one answer for a host that does not resolve and for an address that is not allowed: telling
   * them apart would let a caller map the service's network (which internal names exist). What
   * actually happened travels as the error's `cause`, for the server log only.
   */
  unreachable: (reason: string) => DomainError;
  /** The detail of a failure nothing more is known of: "The image could not be fetched." */
  generic: string;
  /** "image" */
  one: string;
  /** "Image" */
  One: string;
  many: string;
};

/** Rejects when the signal aborts: a slow resolver cannot outlive the deadline. */
function untilAborted(signal: AbortSignal, words: Words): Promise<never> {
  return new Promise((_resolve, reject) => {
    const fail = (): void => reject(words.failed(`The ${words.one} URL did not answer in time.`));
    if (signal.aborted) fail();
    else signal.addEventListener('abort', fail, { once: true });
  });
}

type ConnectorDeps = {
  allow: (ip: string) => boolean;
  lookup: HostLookup;
  ca: string | Buffer | undefined;
  signal: AbortSignal;
  connectTimeoutMs: number;
  words: Words;
};

/**
 * An undici connector that resolves the host once, refuses unless every address is allowed, and opens
 * the socket to the allowed address itself, keeping the hostname for SNI and certificate verification.
 */
function pinnedConnector(undici: typeof import('undici'), deps: ConnectorDeps): buildConnector.connector {
  const { words } = deps;
  const notPublic = (hostname: string, address: string): DomainError =>
    words.unreachable(`${hostname} is at ${address}, which is not an allowed (public) address`);
  const connectTo = undici.buildConnector({
    // `ca` replaces the trusted roots: keep the process's default ones and add the extra certificate.
    ...(deps.ca ? { ca: [...getCACertificates('default'), deps.ca.toString()] } : {}),
    rejectUnauthorized: true,
    allowH2: false,
    timeout: deps.connectTimeoutMs,
    maxCachedSessions: 0,
  });

  const resolve = async (hostname: string): Promise<string[]> => {
    const unresolved = (): DomainError => words.unreachable(`${hostname} could not be resolved`);
    if (isIP(hostname) !== 0) return [hostname];
    const answers = await Promise.race([deps.lookup(hostname), untilAborted(deps.signal, words)]).catch(
      (error: unknown) => {
        if (error instanceof DomainError) throw error;
        throw unresolved();
      },
    );
    if (answers.length === 0) throw unresolved();
    return [...answers];
  };

  return (options, callback) => {
    // undici passes IPv6 literals without brackets.
    const hostname = options.hostname;
    const servername = isIP(hostname) === 0 ? hostname : undefined;
    resolve(hostname)
      .then((addresses) => {
        const refused = addresses.find((ip) => isIP(ip) === 0 || !deps.allow(ip));
        if (refused !== undefined) throw notPublic(hostname, refused);
        const attempt = (index: number): void => {
          const ip = addresses[index] as string;
          connectTo({ ...options, hostname: ip, ...(servername ? { servername } : {}) }, (error, socket) => {
            if (error) {
              const code = (error as NodeJS.ErrnoException).code ?? '';
              const next = index + 1;
              if (TRY_NEXT.has(code) && next < Math.min(addresses.length, MAX_ADDRESSES_TRIED)) {
                attempt(next);
              } else {
                callback(error, null);
              }
              return;
            }
            // Belt and braces: the peer is the address that was checked.
            const peer = (socket as Socket).remoteAddress ?? '';
            if (canonical(peer) !== canonical(ip) || !deps.allow(peer)) {
              socket.destroy();
              callback(notPublic(hostname, `${peer} (connected to instead of ${ip})`), null);
              return;
            }
            callback(null, socket);
          });
        };
        attempt(0);
      })
      .catch((error: unknown) => {
        callback(error instanceof Error ? error : words.failed(words.generic), null);
      });
  };
}

/** Drops a response body that will not be read (destroying it emits an abort error nobody needs). */
function discard(body: Readable): void {
  body.on('error', () => {});
  body.destroy();
}

function requireHttps(url: URL, redirected: boolean, words: Words): void {
  if (url.protocol !== 'https:') {
    throw words.failed(
      redirected
        ? `The ${words.one} URL redirected to a ${url.protocol.replace(/:$/, '')} URL; only https is followed.`
        : `Only https ${words.one} URLs are fetched.`,
    );
  }
  if (url.username !== '' || url.password !== '') {
    throw words.failed(`${words.One} URLs with a user name or password are not fetched.`);
  }
}

const TLS_ERRORS = /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS|ERR_SSL/;

/** What went wrong, for the user: no internal detail, and nothing they could not see from outside. */
function explain(error: unknown, words: Words): DomainError {
  for (let e: unknown = error, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof DomainError) return e;
  }
  const code = String((error as { code?: unknown })?.code ?? '');
  if (TLS_ERRORS.test(code))
    return words.failed(`The ${words.one} host's TLS certificate could not be verified.`);
  if (code === 'ECONNREFUSED') return words.failed(`The ${words.one} host refused the connection.`);
  if (code === 'UND_ERR_CONNECT_TIMEOUT') {
    return words.failed(`The ${words.one} host could not be reached in time.`);
  }
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    return words.failed(`The ${words.one} URL did not answer in time.`);
  }
  return words.failed(words.generic);
}

function sizeText(bytes: number): string {
  return bytes % MIB === 0 ? `${bytes / MIB} MiB` : `${bytes} bytes`;
}

/**
 * A function that GETs a URL over https with the SSRF protections above and returns the 200 answer's
 * headers and body. Throws `DomainError`: `invalid_request` for a malformed URL, `tooLargeCode` for a body
 * over the cap, `failureCode` for everything refused or failed (scheme, address, redirects, status,
 * timeout, TLS).
 */
export function createGuardedFetch(opts: GuardedFetchOptions): GuardedFetch {
  const allow = opts.allowAddresses ?? isPublicAddress;
  const lookup = opts.lookup ?? defaultLookup;
  const timeoutMs = opts.timeoutMs ?? DEFAULT_FETCH_TIMEOUT_MS;
  const maxRedirects = opts.maxRedirects ?? DEFAULT_MAX_REDIRECTS;
  const { maxBytes } = opts;
  const words: Words = {
    failed: (detail) => new DomainError(opts.failureCode, detail),
    unreachable: (reason) => {
      const error = new DomainError(
        opts.failureCode,
        `The ${opts.noun.one} could not be fetched from that address; only ${opts.noun.many} on the public ` +
          'internet can be fetched.',
      );
      error.cause = reason;
      return error;
    },
    generic: `The ${opts.noun.one} could not be fetched.`,
    one: opts.noun.one,
    One: opts.noun.one.charAt(0).toUpperCase() + opts.noun.one.slice(1),
    many: opts.noun.many,
  };
  const tooLarge = (): DomainError =>
    new DomainError(opts.tooLargeCode, `The ${words.one} is larger than the ${sizeText(maxBytes)} accepted.`);

  return async (url) => {
    let current: URL;
    try {
      current = new URL(url);
    } catch {
      throw invalidField(
        `The ${words.one} URL is not a valid absolute URL.`,
        'url',
        'must be an absolute https URL',
      );
    }
    requireHttps(current, false, words);

    const undici = await loadUndici();
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(), timeoutMs);
    // One Agent per fetch: connections (and the checks made when they opened) never outlive it.
    const agent = new undici.Agent({
      connect: pinnedConnector(undici, {
        allow,
        lookup,
        ca: opts.ca,
        signal: deadline.signal,
        connectTimeoutMs: timeoutMs,
        words,
      }),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      connections: 1,
    });
    try {
      for (let redirects = 0; ; redirects++) {
        const response = await undici.request(current, {
          dispatcher: agent,
          method: 'GET',
          signal: deadline.signal,
          headers: { accept: opts.accept, 'accept-encoding': 'identity', 'user-agent': opts.userAgent },
        });
        const { statusCode, headers, body } = response;
        if (REDIRECTS.has(statusCode)) {
          discard(body);
          if (redirects >= maxRedirects) {
            throw words.failed(
              maxRedirects === 0
                ? `The ${words.one} URL answered with a redirect (${statusCode}); redirects are not followed.`
                : `The ${words.one} URL redirected more than ${maxRedirects} times.`,
            );
          }
          const location = headers.location;
          if (typeof location !== 'string' || location === '') {
            throw words.failed(`The ${words.one} URL answered ${statusCode} without a Location.`);
          }
          let next: URL;
          try {
            next = new URL(location, current);
          } catch {
            throw words.failed(`The ${words.one} URL redirected to an invalid URL.`);
          }
          requireHttps(next, true, words);
          current = next;
          continue;
        }
        if (statusCode !== 200) {
          discard(body);
          throw words.failed(`The ${words.one} URL answered with HTTP status ${statusCode}.`);
        }
        // A Content-Length over the cap is refused at once; one under it is not trusted: bytes are counted.
        const declared = Number(headers['content-length']);
        if (Number.isFinite(declared) && declared > maxBytes) {
          discard(body);
          throw tooLarge();
        }
        const chunks: Buffer[] = [];
        let received = 0;
        for await (const chunk of body) {
          received += (chunk as Buffer).length;
          if (received > maxBytes) {
            discard(body);
            throw tooLarge();
          }
          chunks.push(chunk as Buffer);
        }
        return { url: current.href, headers, body: new Uint8Array(Buffer.concat(chunks, received)) };
      }
    } catch (error) {
      if (deadline.signal.aborted && !(error instanceof DomainError && error.code === opts.tooLargeCode)) {
        throw words.failed(`The ${words.one} URL did not answer within ${timeoutMs / 1000} s.`);
      }
      throw explain(error, words);
    } finally {
      clearTimeout(timer);
      agent.destroy().catch(() => {});
    }
  };
}

/** How a guarded POST words its failures, what it may reach, how much it reads and how long it waits. */
export type GuardedPostOptions = {
  /** What is posted to, in the messages: `endpoint` gives "The endpoint host refused the connection." */
  noun: string;
  userAgent: string;
  /** How much of the answer's body is read (the rest is dropped unread). */
  maxAnswerBytes: number;
  /** Deadline for the connection and the answer's status and headers; the body is read within it too. */
  timeoutMs: number;
  /** An extra trusted CA certificate (PEM), in addition to the roots Node trusts by default. */
  ca?: string | Buffer;
  /**
   * Which resolved addresses may be connected to. Default: `isPublicAddress`. An `http:` URL is posted
   * to only when every address its host resolves to is allowed here and is not public: a host of the
   * deployment's own networks (`allowNetworks(OUTBOUND_ALLOW_NETWORKS)`); anything else must be https.
   */
  allowAddresses?: (ip: string) => boolean;
  /** Hostname resolution. Default: the system resolver; whatever it answers is checked. */
  lookup?: HostLookup;
};

/**
 * What a guarded POST came to: the status the server answered with and the first bytes of its body,
 * or, when no answer came (refused address, timeout, TLS, connection), `statusCode` null and why in
 * `error`, in words the owner of the URL may read (nothing of the service's network).
 */
export type PostAnswer = { statusCode: number | null; body: Uint8Array; error: string | null };

/** What a guarded POST sends: its headers (besides accept-encoding and user-agent) and its body. */
export type PostRequest = { headers: Readonly<Record<string, string>>; body: string };

/** Reads a body up to `max` bytes, then drops the rest unread; a deadline reached meanwhile ends it early. */
async function readCapped(body: Readable, max: number): Promise<Uint8Array> {
  const chunks: Buffer[] = [];
  let received = 0;
  try {
    for await (const chunk of body) {
      const bytes = chunk as Buffer;
      chunks.push(bytes.subarray(0, Math.max(0, max - received)));
      received += bytes.length;
      if (received >= max) break;
    }
  } catch {
    // Cut by the deadline or the server: what arrived is kept.
  } finally {
    discard(body);
  }
  return new Uint8Array(Buffer.concat(chunks));
}

/**
 * A function that POSTs to a URL a user gave us with the SSRF protections of `createGuardedFetch`
 * (every resolved address checked, the socket pinned to it, no proxy, no cookies), for webhooks: the
 * answer is taken whatever its status, a redirect is an answer like any other (never followed), at
 * most `maxAnswerBytes` of the body are read, and everything ends at `timeoutMs`. `https:` only,
 * unless the host is on the deployment's own allowed networks (see `allowAddresses`). Never throws:
 * what went wrong is the answer's `error`.
 */
export function createGuardedPost(
  opts: GuardedPostOptions,
): (url: string, request: PostRequest) => Promise<PostAnswer> {
  const allow = opts.allowAddresses ?? isPublicAddress;
  const lookup = opts.lookup ?? defaultLookup;
  const { noun, timeoutMs } = opts;
  const wordsFor = (unreachable: string): Words => ({
    // The codes are never seen: a POST reports the message.
    failed: (detail) => new DomainError('invalid_request', detail),
    unreachable: (reason) => {
      const error = new DomainError('invalid_request', unreachable);
      error.cause = reason;
      return error;
    },
    generic: `The request to the ${noun} failed.`,
    one: noun,
    One: noun.charAt(0).toUpperCase() + noun.slice(1),
    many: `${noun}s`,
  });
  const httpsWords = wordsFor(
    `The ${noun} URL's host is not at an address the service may send to; only hosts on the public ` +
      'internet (or on the networks the deployment allows) are reached.',
  );
  const httpWords = wordsFor(
    `An http ${noun} URL is sent to only when its host is on the networks the deployment allows ` +
      '(OUTBOUND_ALLOW_NETWORKS); use https.',
  );
  const failure = (error: string): PostAnswer => ({ statusCode: null, body: new Uint8Array(), error });

  return async (url, message) => {
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      return failure(`The ${noun} URL is not a valid absolute URL.`);
    }
    if (target.protocol !== 'https:' && target.protocol !== 'http:') {
      return failure(`Only https ${noun} URLs are sent to.`);
    }
    if (target.username !== '' || target.password !== '') {
      return failure(`${httpsWords.One} URLs with a user name or password are not sent to.`);
    }
    const plain = target.protocol === 'http:';
    const words = plain ? httpWords : httpsWords;
    const undici = await loadUndici();
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(), timeoutMs);
    const agent = new undici.Agent({
      connect: pinnedConnector(undici, {
        allow: plain ? (ip) => allow(ip) && !isPublicAddress(ip) : allow,
        lookup,
        ca: opts.ca,
        signal: deadline.signal,
        connectTimeoutMs: timeoutMs,
        words,
      }),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      connections: 1,
    });
    try {
      const response = await undici.request(target, {
        dispatcher: agent,
        method: 'POST',
        signal: deadline.signal,
        headers: { ...message.headers, 'accept-encoding': 'identity', 'user-agent': opts.userAgent },
        body: message.body,
      });
      const body = await readCapped(response.body, opts.maxAnswerBytes);
      return { statusCode: response.statusCode, body, error: null };
    } catch (error) {
      if (deadline.signal.aborted) return failure(`The ${noun} did not answer within ${timeoutMs / 1000} s.`);
      return failure(explain(error, words).message);
    } finally {
      clearTimeout(timer);
      agent.destroy().catch(() => {});
    }
  };
}
