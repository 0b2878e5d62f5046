import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { FastifyPluginAsync } from 'fastify';
import { FAVICON_PATH } from './html.ts';

/** The icon, committed beside this file: a small SVG. */
const FAVICON_FILE = resolve(import.meta.dirname, 'favicon.svg');

/** 30 days: the icon changes with a release, if ever. */
const FAVICON_CACHE = 'public, max-age=2592000, immutable';

/**
 * The service's icon, at the address every page links (`FAVICON_PATH`) and at `/favicon.ico`, which
 * browsers ask for by themselves on answers that link none (JSON, the API reference): the same SVG,
 * kept by browsers for 30 days.
 */
export const favicon: FastifyPluginAsync = async (app) => {
  const icon = await readFile(FAVICON_FILE);
  for (const url of [FAVICON_PATH, '/favicon.ico']) {
    app.get(url, { schema: { hide: true } }, async (_request, reply) =>
      reply
        .type('image/svg+xml')
        .header('cache-control', FAVICON_CACHE)
        .header('x-content-type-options', 'nosniff')
        .send(icon),
    );
  }
};
