import { performance } from 'node:perf_hooks';
import { Webhook } from 'standardwebhooks';
import { WEBHOOK_TIMEOUT_SECONDS } from '../../domain/vocabulary.ts';
import { createGuardedPost, type HostLookup } from '../net/guarded-fetch.ts';

/*
 * Sending one webhook message (CONTRACT "Webhooks"): signed as Standard Webhooks specifies (the
 * `standardwebhooks` library: HMAC-SHA256 of `{id}.{timestamp}.{body}` with the endpoint's secret), POSTed
 * as JSON through the SSRF guard (infra/net/guarded-fetch.ts `createGuardedPost`). Whatever happens comes
 * back as an outcome; nothing is thrown, so the caller records every attempt the same way.
 */

/** How much of an endpoint's answer is read: its status is what counts, the body is not kept. */
export const ANSWER_READ_BYTES = 64 * 1024;

/** One message to one endpoint; `id` is the message id (`webhook-id`), the same on every attempt. */
export type OutgoingWebhook = {
  url: string;
  /** The endpoint's secret, `whsec_` and base64 of its key. */
  secret: string;
  id: string;
  /** The attempt's time (`webhook-timestamp`, in seconds). */
  timestamp: Date;
  /** The JSON body, exactly as signed. */
  body: string;
};

/** What an attempt came to: the endpoint's status (null: no answer) and why there was none. */
export type SendOutcome = { statusCode: number | null; durationMs: number; error: string | null };

/** Sends one message; never throws. */
export type SendWebhook = (message: OutgoingWebhook) => Promise<SendOutcome>;

/** The Standard Webhooks headers of a message: its id, its time, and the signature of both with the body. */
export function signatureHeaders(
  secret: string,
  id: string,
  timestamp: Date,
  body: string,
): { 'webhook-id': string; 'webhook-timestamp': string; 'webhook-signature': string } {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
    'webhook-signature': new Webhook(secret).sign(id, timestamp, body),
  };
}

/** What the sender may reach and how long it waits (the composition root passes OUTBOUND_ALLOW_NETWORKS). */
export type WebhookSenderOptions = {
  /**
   * Which resolved addresses may be reached (default: public ones only); an http URL only when every
   * address of its host is allowed here and is not public (`allowNetworks(OUTBOUND_ALLOW_NETWORKS)`).
   */
  allowAddresses?: (ip: string) => boolean;
  /** Hostname resolution (default: the system resolver); tests map names to loopback with it. */
  lookup?: HostLookup;
  /** An extra trusted CA certificate (PEM). */
  ca?: string | Buffer;
  /** Default WEBHOOK_TIMEOUT_SECONDS. */
  timeoutMs?: number;
};

/** The sender of webhook messages: sign, POST through the SSRF guard, time it. */
export function createWebhookSender(opts: WebhookSenderOptions = {}): SendWebhook {
  const post = createGuardedPost({
    noun: 'endpoint',
    userAgent: 'ContentService-Webhooks/1',
    maxAnswerBytes: ANSWER_READ_BYTES,
    timeoutMs: opts.timeoutMs ?? WEBHOOK_TIMEOUT_SECONDS * 1000,
    ...(opts.allowAddresses ? { allowAddresses: opts.allowAddresses } : {}),
    ...(opts.lookup ? { lookup: opts.lookup } : {}),
    ...(opts.ca ? { ca: opts.ca } : {}),
  });
  return async (message) => {
    const started = performance.now();
    const elapsed = (): number => Math.round(performance.now() - started);
    let headers: ReturnType<typeof signatureHeaders>;
    try {
      headers = signatureHeaders(message.secret, message.id, message.timestamp, message.body);
    } catch {
      return {
        statusCode: null,
        durationMs: elapsed(),
        error: "The endpoint's signing secret is not valid.",
      };
    }
    const answer = await post(message.url, {
      headers: { 'content-type': 'application/json', ...headers },
      body: message.body,
    });
    return { statusCode: answer.statusCode, durationMs: elapsed(), error: answer.error };
  };
}
