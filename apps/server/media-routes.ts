import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { DomainError } from '../../domain/errors.ts';
import { MEDIA_KEY, type MediaStore } from '../../infra/media/store.ts';
import { Problem } from './http/schemas.ts';

type MediaRouteDeps = { store: MediaStore };

const MediaParams = z.object({
  name: z.string().meta({
    description: 'The stored file: `<sha256 of the bytes>.<jpg|png|webp|gif|avif>`.',
    examples: ['9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08.png'],
  }),
});

/**
 * `GET /media/<sha256>.<ext>`: featured images, public (their URLs appear in articles) and immutable (a
 * name is the hash of its bytes), so they may be cached forever. Any name that is not exactly a stored
 * key is a 404: the strict pattern admits no path separator, dot segment or encoding trick.
 */
export const mediaRoutes: FastifyPluginAsyncZod<MediaRouteDeps> = async (app, { store }) => {
  app.get(
    '/media/:name',
    {
      schema: {
        params: MediaParams,
        response: {
          200: z.any().meta({ description: 'The image bytes, with their media type.' }),
          304: z.null().meta({ description: 'The copy named in `If-None-Match` is current.' }),
          404: Problem,
        },
        // Binary responses: left out of the JSON API's OpenAPI document (which would describe them as JSON).
        hide: true,
        summary: 'A stored featured image',
      },
    },
    async (request, reply) => {
      const { name } = request.params;
      const object = MEDIA_KEY.test(name) ? await store.get(name) : null;
      if (!object) throw new DomainError('not_found', 'No such image');
      const etag = `"${object.sha256}"`;
      reply
        .header('cache-control', 'public, max-age=31536000, immutable')
        .header('x-content-type-options', 'nosniff')
        // Served from the service's own origin: an image is never a document that could run anything.
        .header('content-security-policy', "default-src 'none'; sandbox")
        .header('etag', etag);
      const ifNoneMatch = request.headers['if-none-match'];
      if (
        typeof ifNoneMatch === 'string' &&
        ifNoneMatch.split(',').some((t) => t.trim() === etag || t.trim() === `W/${etag}` || t.trim() === '*')
      ) {
        object.stream.destroy();
        return reply.status(304).send(null);
      }
      return reply.type(object.mime).header('content-length', object.size).send(object.stream);
    },
  );
};
