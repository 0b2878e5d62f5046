import { z } from 'zod';
import {
  ALT_MAX,
  BODY_MAX_MIB,
  MAX_IMAGE_MIB,
  MAX_IMAGE_SIDE,
  REASON_MAX,
  TITLE_MAX,
} from '../../../domain/article/events.ts';
import { ArticleChange, Revision, RevisionContent } from '../../application/wire-schemas.ts';
import { atMost, cleanText, idParam } from './schemas.ts';

export { ArticleChange, Revision, RevisionContent };

const reasonField = cleanText(z.string().max(REASON_MAX, atMost(REASON_MAX)), { lines: true })
  .nullable()
  .optional();

export const EditArticleBody = z
  .strictObject({
    title: cleanText(z.string().min(1, 'must not be empty').max(TITLE_MAX, atMost(TITLE_MAX)), {
      lines: false,
    }).optional(),
    // Its text rule (no control characters but tab and line breaks, no lone surrogates) is the
    // decider's, with the same 400 naming `body`: one scan of up to 2 MiB per edit, not two.
    body: z
      .string()
      .optional()
      .meta({ description: `The new HTML body, at most ${BODY_MAX_MIB} MiB; sanitised as the editor does.` }),
    reason: reasonField,
  })
  .refine((b) => b.title !== undefined || b.body !== undefined, {
    message: 'give a title, a body, or both',
    path: ['title'],
  })
  .meta({
    id: 'EditArticle',
    example: {
      title: 'How to choose a boiler in 2026',
      body: '<p>Updated intro.</p><p>Read our <a href="https://northside-plumbing.example/services" data-service-protected="internal" data-service-id="il_1">boiler services</a> first.</p>',
      reason: 'Refreshed for the new year',
    },
  });

export const RevisionParams = z.strictObject({
  id: idParam.meta({ description: 'Article id' }),
  n: z.coerce
    .number({ message: 'must be a whole number' })
    .int('must be a whole number')
    .min(1, 'must be 1 or more')
    .max(1_000_000)
    .meta({ description: 'Revision number, from 1 (the creation)' }),
});

export const RestoreBody = z
  .strictObject({ reason: reasonField })
  .meta({ id: 'Restore', example: { reason: 'Back to the version before the rewrite' } });

export const WriteHeaders = z.object({
  'if-match': z.string().optional().meta({
    description: 'The ETag of the revision the edit is based on (`W/"3"`): a stale one is refused with 412.',
  }),
  'idempotency-key': z.string().optional().meta({
    description:
      'A retry with the same key and body within 24 h returns the first response and changes nothing more.',
  }),
});

export const FeaturedImageJsonBody = z
  .strictObject({
    url: cleanText(z.url({ message: 'must be an absolute URL' }).max(2048), { lines: false }).meta({
      description: 'An https address of the image.',
    }),
    alt: cleanText(z.string().max(ALT_MAX, atMost(ALT_MAX)), { lines: false })
      .optional()
      .meta({ description: 'Alternative text.' }),
  })
  .meta({
    id: 'FeaturedImageFromUrl',
    example: { url: 'https://images.example.org/boiler.webp', alt: 'A new combi boiler' },
  });

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
