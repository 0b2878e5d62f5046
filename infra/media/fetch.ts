import { MAX_IMAGE_BYTES } from '../../domain/article/events.ts';
import {
  createGuardedFetch,
  DEFAULT_FETCH_TIMEOUT_MS,
  DEFAULT_MAX_REDIRECTS,
  type HostLookup,
} from '../net/guarded-fetch.ts';

/*
 * Fetching a featured image from a URL a user gave us (CONTRACT "Writes", `{url}`), without letting that
 * user reach anything the service can reach and they cannot (SSRF). The protections live in
 * infra/net/guarded-fetch.ts (shared with the OAuth client metadata documents): https only, every
 * resolved address public and the socket pinned to it, at most 3 redirects each checked again, 10 s and
 * 10 MiB at most, no proxy, no cookies, no decompression.
 */

export { allowNetworks, type HostLookup, isPublicAddress } from '../net/guarded-fetch.ts';

type ImageFetcherOptions = {
  /**
   * An extra trusted CA certificate (PEM), in addition to the roots Node trusts by default
   * (`MEDIA_FETCH_CA_FILE`): for deployments whose image hosts use a private CA, and for tests with a
   * self-signed certificate.
   */
  ca?: string | Buffer;
  /**
   * Which resolved addresses may be connected to. Default: `isPublicAddress` (public unicast only).
   * Exists for private deployments that must fetch from an internal image host
   * (`OUTBOUND_ALLOW_NETWORKS`, see `allowNetworks`) and for tests that serve images locally. Unset,
   * only public addresses are reachable.
   */
  allowAddresses?: (ip: string) => boolean;
  /**
   * Hostname resolution. Default: the system resolver (getaddrinfo, as every other connection of the
   * process). Tests map test hostnames to 127.0.0.1 with it; whatever it answers is checked the same way.
   */
  lookup?: HostLookup;
  /** Deadline for the whole fetch, redirects and body included. Default 10 000 ms (CONTRACT). */
  timeoutMs?: number;
  /** Largest body accepted. Default 10 MiB (CONTRACT). */
  maxBytes?: number;
};

export type FetchImage = (url: string) => Promise<Uint8Array>;

/** CONTRACT: at most 3 redirects. */
const MAX_REDIRECTS = DEFAULT_MAX_REDIRECTS;

/**
 * A function that downloads an image over https with the SSRF protections above and returns its bytes
 * (unchecked: give them to `inspectImage`). Throws `DomainError`: `invalid_request` for a malformed URL,
 * `image_too_large` for a body over the cap, `image_fetch_failed` for everything refused or failed
 * (scheme, address, redirects, status, timeout, TLS).
 */
export function createImageFetcher(opts: ImageFetcherOptions = {}): FetchImage {
  const fetch = createGuardedFetch({
    noun: { one: 'image', many: 'images' },
    failureCode: 'image_fetch_failed',
    tooLargeCode: 'image_too_large',
    accept: 'image/avif,image/webp,image/png,image/jpeg,image/gif;q=0.9,*/*;q=0.1',
    userAgent: 'ContentService-ImageFetcher/1 (+featured images)',
    maxBytes: opts.maxBytes ?? MAX_IMAGE_BYTES,
    maxRedirects: MAX_REDIRECTS,
    timeoutMs: opts.timeoutMs ?? DEFAULT_FETCH_TIMEOUT_MS,
    ...(opts.ca ? { ca: opts.ca } : {}),
    ...(opts.allowAddresses ? { allowAddresses: opts.allowAddresses } : {}),
    ...(opts.lookup ? { lookup: opts.lookup } : {}),
  });
  return async (url) => (await fetch(url)).body;
}
