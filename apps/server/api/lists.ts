import type { FastifyReply } from 'fastify';
import type { Listed } from '../../application/lists.ts';

type ListBody<T> = Listed<T> & {
  links: { self: string; first: string; last: string; prev: string | null; next: string | null };
};

/**
 * The list envelope of CONTRACT "Lists": the application's page with its links, also in an RFC 8288
 * `Link` header. Links are absolute (PUBLIC_URL) and keep every other query parameter the caller sent.
 */
export function sendList<T>(
  reply: FastifyReply,
  opts: { publicUrl: string; path: string; query: Record<string, unknown> },
  list: Listed<T>,
): ListBody<T> {
  const { page, per_page: perPage, total_pages: totalPages } = list.meta;
  const last = Math.max(1, totalPages);
  const url = (p: number): string => {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(opts.query)) {
      if (value === undefined || key === 'page' || key === 'per_page') continue;
      params.set(key, String(value));
    }
    params.set('page', String(p));
    params.set('per_page', String(perPage));
    return `${opts.publicUrl}${opts.path}?${params.toString()}`;
  };
  const links = {
    self: url(page),
    first: url(1),
    last: url(last),
    prev: page > 1 ? url(Math.min(page - 1, last)) : null,
    next: page < totalPages ? url(page + 1) : null,
  };
  const header = Object.entries(links)
    .filter((entry): entry is [string, string] => entry[1] !== null)
    .map(([rel, href]) => `<${href}>; rel="${rel}"`)
    .join(', ');
  reply.header('link', header);
  return { ...list, links };
}
