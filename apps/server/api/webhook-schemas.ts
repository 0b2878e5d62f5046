import { z } from 'zod';
import { WEBHOOK_EVENT_TYPES } from '../../../domain/vocabulary.ts';
import { atMost, idParam } from '../../application/contract.ts';
import { WEBHOOK_DESCRIPTION_MAX, WEBHOOK_URL_MAX } from '../../application/webhooks.ts';
import {
  NewWebhookEndpoint,
  WebhookDelivery,
  WebhookEndpoint,
  WebhookEventType,
  WebhookReplay,
} from '../../application/wire.ts';

/*
 * The webhook routes' requests as zod schemas (CONTRACT "Webhooks"). They check shapes; the rules of
 * a URL, of the events and of a description are the application's (apps/application/webhooks.ts), one
 * place for every face, and come back as 400s naming the field.
 */

export { NewWebhookEndpoint, WebhookDelivery, WebhookEndpoint, WebhookReplay };

const urlField = z
  .string({ message: 'must be a URL (a string)' })
  .min(1, 'must not be empty')
  .max(WEBHOOK_URL_MAX, atMost(WEBHOOK_URL_MAX))
  .meta({
    description:
      'Where deliveries are POSTed: an absolute https URL without a user name or password. http only for an ' +
      'internal address the service is configured to reach (OUTBOUND_ALLOW_NETWORKS).',
    examples: ['https://hooks.northside-plumbing.example/content'],
  });
const eventsField = z
  .array(WebhookEventType)
  .min(1, 'must name at least one event type')
  .max(WEBHOOK_EVENT_TYPES.length)
  .meta({ description: 'The event types to receive: at least one, each once.' });
const descriptionField = z
  .string()
  .max(WEBHOOK_DESCRIPTION_MAX, atMost(WEBHOOK_DESCRIPTION_MAX))
  .nullable()
  .meta({
    description: `What the endpoint is for, one line of at most ${WEBHOOK_DESCRIPTION_MAX} characters.`,
  });

export const CreateWebhookBody = z
  .strictObject({ url: urlField, events: eventsField, description: descriptionField.optional() })
  .meta({
    id: 'CreateWebhookEndpoint',
    example: {
      url: 'https://hooks.northside-plumbing.example/content',
      events: ['article.published', 'report.ready'],
      description: 'Publishing notices for the team chat',
    },
  });

export const UpdateWebhookBody = z
  .strictObject({
    url: urlField.optional(),
    events: eventsField.optional(),
    description: descriptionField.optional().meta({ description: 'A new description; null clears it.' }),
    enabled: z
      .boolean()
      .optional()
      .meta({
        description:
          '`false` stops deliveries (reason `account`); `true` enables a disabled endpoint again: its pending ' +
          'deliveries go out in their order.',
      }),
  })
  .refine((b) => Object.values(b).some((v) => v !== undefined), {
    message: 'give at least one of url, events, description, enabled',
    path: ['url'],
  })
  .meta({ id: 'UpdateWebhookEndpoint', example: { enabled: true } });

export const ReplayBody = z
  .strictObject({
    from: z.iso
      .datetime({ offset: true, message: 'must be an RFC 3339 time, like 2026-11-02T09:30:00Z' })
      .meta({
        description:
          'An RFC 3339 time, not in the future: every event of the endpoint’s types recorded since then is sent again.',
        examples: ['2026-11-02T09:30:00Z'],
      }),
  })
  .meta({ id: 'ReplayWebhookEvents', example: { from: '2026-11-02T09:30:00Z' } });

export const WebhookParams = z.strictObject({
  id: idParam.meta({ description: 'Webhook endpoint id', examples: ['whe_06h01a8m0qhs7q1n0x1d4c3b2a'] }),
});

export const DeliveryParams = z.strictObject({
  id: idParam.meta({ description: 'Webhook endpoint id', examples: ['whe_06h01a8m0qhs7q1n0x1d4c3b2a'] }),
  delivery_id: idParam.meta({ description: 'Delivery id', examples: ['dlv_06h01b2c3d4e5f6g7h8j9k0m1n'] }),
});
