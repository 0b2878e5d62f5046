import type { FastifyReply } from 'fastify';
import type { Page } from '../../application/call.ts';

type ListBody<T> = {
  data: T[];
  meta: { page: number; per_page: number; total: number; total_pages: number };
  links: { self: string; first: string; last: string; prev: string | null; next: string | null };
};

/**
 * The list envelope of CONTRACT "Lists", with the same links in an RFC 8288 `Link` header. Links are
 * absolute (PUBLIC_URL) and keep every other query parameter the caller sent.
 */
export function sendList<T>(
  reply: FastifyReply,
  opts: { publicUrl: string; path: string; query: Record<string, unknown>; page: number; perPage: number },
  result: Page<T>,
): ListBody<T> {
  const { page, perPage } = opts;
  const totalPages = Math.ceil(result.total / perPage);
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
  return {
    data: result.rows,
    meta: { page, per_page: perPage, total: result.total, total_pages: totalPages },
    links,
  };
}
