import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { WEBHOOK_ENDPOINTS_MAX, WEBHOOK_EVENT_TYPES } from '../../../domain/vocabulary.ts';
import { PageQuery } from '../../application/contract.ts';
import type { Application } from '../../application/index.ts';
import {
  CreateWebhookBody,
  DeliveryParams,
  NewWebhookEndpoint,
  ReplayBody,
  UpdateWebhookBody,
  WebhookDelivery,
  WebhookEndpoint,
  WebhookParams,
  WebhookReplay,
} from '../../application/webhooks.ts';
import { settled } from '../http/outcome.ts';
import { listOf, Problem } from '../http/schemas.ts';
import { IdempotencyHeaders } from '../http/write-schemas.ts';
import { apiCall, idempotencyOf, settledAnswer } from './call.ts';
import { sendList } from './lists.ts';

type WebhookRouteDeps = { application: Application; publicUrl: string };

/** Every webhook route needs a write key (403 for a read key), reads included (CONTRACT "Webhooks"). */
const accountErrors = { 400: Problem, 401: Problem, 403: Problem, 429: Problem } as const;
const endpointErrors = { ...accountErrors, 404: Problem } as const;

const exampleEndpoint = 'whe_06h01a8m0qhs7q1n0x1d4c3b2a';
const WebhookEndpointList = listOf(WebhookEndpoint, 'WebhookEndpointList', {
  of: 'webhook endpoints',
  examplePath: '/api/v1/webhooks',
});
const WebhookDeliveryList = listOf(WebhookDelivery, 'WebhookDeliveryList', {
  of: 'deliveries, newest first',
  examplePath: `/api/v1/webhooks/${exampleEndpoint}/deliveries`,
});

const URL_RULES =
  'The URL is absolute https, without a user name or password; http only for an internal address the ' +
  'service is configured to reach (OUTBOUND_ALLOW_NETWORKS), and an address written as an IP must be ' +
  'public or such an internal one.';

const REPLAY_RULES =
  'With an `Idempotency-Key`, a retry with the same key and request within 24 h gets the first answer ' +
  '(`Idempotent-Replayed: true`) and changes nothing more; the same key with another request is a 400.';

/** The path of an endpoint, its parts escaped. */
const endpointPath = (id: string): string => `/api/v1/webhooks/${encodeURIComponent(id)}`;

/**
 * `/webhooks`: the account's webhook endpoints, their deliveries, redelivery and replay. Sending is the
 * delivery engine's; these store what the account asks for (apps/application/webhooks.ts).
 */
export const webhookRoutes: FastifyPluginAsyncZod<WebhookRouteDeps> = async (
  app,
  { application, publicUrl },
) => {
  const { webhooks } = application;

  app.post(
    '/webhooks',
    {
      config: { operation: 'create_webhook', scope: 'write' },
      schema: {
        tags: ['webhooks'],
        summary: 'Register a webhook endpoint',
        description:
          `The account's events of the types named are POSTed to the URL, signed (Standard Webhooks). ${URL_RULES} ` +
          `The answer carries the signing secret (\`whsec_...\`): it is shown this once. At most ` +
          `${WEBHOOK_ENDPOINTS_MAX} endpoints per account: one more is a 409 \`conflict\` (delete one first). ` +
          `Event types: ${WEBHOOK_EVENT_TYPES.map((t) => `\`${t}\``).join(', ')}. ${REPLAY_RULES} ` +
          'A replay carries the secret too: it is the first answer, to the caller that asked for it.',
        headers: IdempotencyHeaders,
        body: CreateWebhookBody,
        response: { 201: NewWebhookEndpoint, ...accountErrors, 409: Problem },
        responseHeaders: { 201: ['Idempotent-Replayed'] },
      },
    },
    async (req, reply) => {
      const answer = await webhooks.create(apiCall(req), req.body, idempotencyOf(req, req.body));
      return reply.status(201).send(settledAnswer(req, reply, answer));
    },
  );

  app.get(
    '/webhooks',
    {
      config: { operation: 'list_webhooks', scope: 'write' },
      schema: {
        tags: ['webhooks'],
        summary: "List the account's webhook endpoints",
        description:
          'Oldest first (ties by id), without their secrets. Paginated with `page` and `per_page`.',
        querystring: PageQuery,
        response: { 200: WebhookEndpointList, ...accountErrors },
      },
    },
    async (req, reply) => {
      const result = settled(req, reply, await webhooks.list(apiCall(req), req.query));
      return sendList(reply, { publicUrl, path: '/api/v1/webhooks', query: req.query }, result);
    },
  );

  app.get(
    '/webhooks/:id',
    {
      config: { operation: 'get_webhook', scope: 'write' },
      schema: {
        tags: ['webhooks'],
        summary: 'Get one webhook endpoint',
        description: 'Whether it is enabled, and if not, why (`gone`, `failing`, `account`) and since when.',
        params: WebhookParams,
        response: { 200: WebhookEndpoint, ...endpointErrors },
      },
    },
    async (req, reply) => settled(req, reply, await webhooks.get(apiCall(req), req.params.id)),
  );

  app.patch(
    '/webhooks/:id',
    {
      config: { operation: 'update_webhook', scope: 'write' },
      schema: {
        tags: ['webhooks'],
        summary: 'Change a webhook endpoint, or enable or disable it',
        description:
          `Any of \`url\`, \`events\`, \`description\` (null clears it) and \`enabled\`. ${URL_RULES} ` +
          '`enabled: false` stops deliveries (reason `account`; they wait, pending). `enabled: true` enables a ' +
          `disabled endpoint again, whatever disabled it, and its pending deliveries go out in their order. ${REPLAY_RULES}`,
        params: WebhookParams,
        headers: IdempotencyHeaders,
        body: UpdateWebhookBody,
        response: { 200: WebhookEndpoint, ...endpointErrors },
        responseHeaders: { 200: ['Idempotent-Replayed'] },
      },
    },
    async (req, reply) => {
      const { id } = req.params;
      const answer = await webhooks.update(apiCall(req), id, req.body, idempotencyOf(req, req.body));
      return settledAnswer(req, reply, answer);
    },
  );

  app.delete(
    '/webhooks/:id',
    {
      config: { operation: 'delete_webhook', scope: 'write' },
      schema: {
        tags: ['webhooks'],
        summary: 'Delete a webhook endpoint',
        description: `Its deliveries, sent or pending, go with it. ${REPLAY_RULES}`,
        params: WebhookParams,
        headers: IdempotencyHeaders,
        response: {
          204: z.null().meta({ description: 'Deleted' }),
          ...endpointErrors,
        },
        responseHeaders: { 204: ['Idempotent-Replayed'] },
      },
    },
    async (req, reply) => {
      settledAnswer(req, reply, await webhooks.remove(apiCall(req), req.params.id, idempotencyOf(req)));
      return reply.status(204).send(null);
    },
  );

  app.get(
    '/webhooks/:id/deliveries',
    {
      config: { operation: 'list_webhook_deliveries', scope: 'write' },
      schema: {
        tags: ['webhooks'],
        summary: "List a webhook endpoint's deliveries",
        description:
          'Newest first, each with its status, the last answer (status code, duration, error) and its latest ' +
          '10 attempts. Paginated with `page` and `per_page`.',
        params: WebhookParams,
        querystring: PageQuery,
        response: { 200: WebhookDeliveryList, ...endpointErrors },
      },
    },
    async (req, reply) => {
      const result = settled(req, reply, await webhooks.deliveries(apiCall(req), req.params.id, req.query));
      const path = `${endpointPath(req.params.id)}/deliveries`;
      return sendList(reply, { publicUrl, path, query: req.query }, result);
    },
  );

  app.post(
    '/webhooks/:id/deliveries/:delivery_id/redeliver',
    {
      config: { operation: 'redeliver_webhook', scope: 'write' },
      schema: {
        tags: ['webhooks'],
        summary: 'Send a delivery again',
        description:
          'A new delivery (`source: redelivery`) of the same message: the same `webhook-id` and body, so a receiver ' +
          'that deduplicates by `webhook-id` sees it as the message it had. It is sent after the endpoint’s ' +
          'pending deliveries (when the endpoint is enabled).',
        params: DeliveryParams,
        response: { 202: WebhookDelivery, ...endpointErrors },
      },
    },
    async (req, reply) =>
      reply
        .status(202)
        .send(
          settled(req, reply, await webhooks.redeliver(apiCall(req), req.params.id, req.params.delivery_id)),
        ),
  );

  app.post(
    '/webhooks/:id/replay',
    {
      config: { operation: 'replay_webhook', scope: 'write' },
      schema: {
        tags: ['webhooks'],
        summary: 'Send the events since a time again',
        description:
          'Every event of the endpoint’s types recorded at or after `from` (RFC 3339, not in the future) is ' +
          'queued again, in log order, as `replay` deliveries after the endpoint’s pending ones. The answer ' +
          'says how many.',
        params: WebhookParams,
        body: ReplayBody,
        response: { 202: WebhookReplay, ...endpointErrors },
      },
    },
    async (req, reply) =>
      reply
        .status(202)
        .send(settled(req, reply, await webhooks.replay(apiCall(req), req.params.id, req.body))),
  );
};
