import { z } from 'zod';
import { ALT_MAX, MAX_IMAGE_MIB, MAX_IMAGE_SIDE } from '../../../domain/article/events.ts';

const IdempotencyKey = z.string().optional().meta({
  description:
    'A retry with the same key and body within 24 h returns the first response and changes nothing more.',
});

/** The headers of an article write: its base revision, and an Idempotency-Key. */
export const WriteHeaders = z.object({
  'if-match': z.string().optional().meta({
    description: 'The ETag of the revision the edit is based on (`W/"3"`): a stale one is refused with 412.',
  }),
  'idempotency-key': IdempotencyKey,
});

/** The headers of a write with an Idempotency-Key only (a webhook endpoint's). */
export const IdempotencyHeaders = z.object({ 'idempotency-key': IdempotencyKey });

/** Documentation of the multipart form (the route reads it as a stream, not through a validator). */
export const FeaturedImageMultipartDoc = {
  type: 'object',
  required: ['image'],
  properties: {
    image: {
      type: 'string',
      format: 'binary',
      description: `The image file: JPEG, PNG, WebP, GIF or AVIF; at most ${MAX_IMAGE_MIB} MiB and ${MAX_IMAGE_SIDE} x ${MAX_IMAGE_SIDE} px.`,
    },
    alt: { type: 'string', maxLength: ALT_MAX, description: 'Alternative text.' },
  },
} as const;
