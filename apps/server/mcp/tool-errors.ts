import type { CallToolResult } from '@modelcontextprotocol/server';
import { serializeOuter } from 'parse5';
import type { z } from 'zod';
import { MAX_IMAGE_MIB, MAX_IMAGE_SIDE } from '../../../domain/article/events.ts';
import { type ErrorCode, isDomainError } from '../../../domain/errors.ts';
import {
  isElement,
  PROTECTED_ATTRIBUTE,
  PROTECTED_ID_ATTRIBUTE,
  parseBody,
  walk,
} from '../../../domain/html/tree.ts';
import type { ParameterError } from '../../application/contract.ts';
import { statusOf, UNAVAILABLE_DETAIL, UNAVAILABLE_RETRY_AFTER_S, wireErrors } from '../http/errors.ts';

/**
 * Where a failed call's code, detail and details travel besides its text: a namespaced `_meta` entry, on
 * both eras. On the 2025 era only there: the tools declare an outputSchema, and clients built on the
 * TypeScript SDK 1.x validate any structuredContent against it even on an `isError` result, so an error
 * object there would turn every refusal into a client-side schema failure the model never sees
 * (modelcontextprotocol/typescript-sdk#1943). On the 2026-07-28 era also in `structuredContent`
 * (`withStructuredError`).
 */
export const ERROR_META_KEY = 'content-service.dev/error';

type ToolErrorInfo = { code: ErrorCode; detail: string; errors?: readonly Record<string, unknown>[] };

export type ToolFailure = { status: number; code: ErrorCode; result: CallToolResult };

/** What a model should do next, per code, after the detail. */
const advice: Partial<Record<ErrorCode, string>> = {
  not_found:
    'Check the id: list_sites and list_articles give the ids this connection can use (the ids of other ' +
    'accounts are unknown here).',
  invalid_request: 'Fix the arguments listed above and call again.',
  insufficient_scope:
    'This connection was allowed to read only. To edit, the person must connect the assistant again and allow ' +
    'editing.',
  revision_mismatch:
    'Someone changed the article since the revision you gave. Call get_article for the current body and ' +
    'revision, apply your change to it, and call again.',
  rate_limited: 'Wait the time stated, then call again.',
  edit_limit_reached: 'No more article edits are possible today; they are again after midnight UTC.',
  conflict: 'Another change to the same article happened at the same moment; call again.',
  image_fetch_failed: 'Use a public https address that serves the image itself (not a page showing it).',
  unsupported_image: 'Use a JPEG, PNG, WebP, GIF or AVIF image.',
  diff_too_large:
    'Read the two revisions whole with get_revision (revision from, then revision to), or compare revisions ' +
    'closer together.',
  image_too_large: `Use an image of at most ${MAX_IMAGE_MIB} MiB and ${MAX_IMAGE_SIDE} x ${MAX_IMAGE_SIDE} pixels.`,
  unavailable:
    `Wait ${UNAVAILABLE_RETRY_AFTER_S} seconds, then call again. A change cut off this way may have been made: ` +
    'call it again with the same idempotency_key, or check with get_article first.',
};

function failure(status: number, info: ToolErrorInfo, text: string): ToolFailure {
  return {
    status,
    code: info.code,
    result: {
      isError: true,
      content: [{ type: 'text', text }],
      _meta: {
        [ERROR_META_KEY]: {
          code: info.code,
          detail: info.detail,
          ...(info.errors && info.errors.length > 0 ? { errors: info.errors } : {}),
        },
      },
    },
  };
}

/**
 * A failed call as the 2026-07-28 era answers it: the same result with its code, detail and details also
 * in `structuredContent`, where that revision's clients (the SDK's 2.x client among them) read them
 * without checking them against the tool's output schema, as an `isError` result is exempt.
 */
export function withStructuredError(result: CallToolResult): CallToolResult {
  const info = result._meta?.[ERROR_META_KEY];
  if (!result.isError || typeof info !== 'object' || info === null) return result;
  return { ...result, structuredContent: { ...info } };
}

/** A tool's refusal: the CONTRACT code and its (safe) detail, with what to do about it. */
export function refusal(info: ToolErrorInfo, extra: string[] = []): ToolFailure {
  const lines = [`Error ${info.code}: ${info.detail}`];
  if (info.code === 'invalid_request' && info.errors) {
    for (const e of info.errors) lines.push(`- ${String(e.name)}: ${String(e.message)}`);
  }
  lines.push(...extra);
  const hint = advice[info.code];
  if (hint) lines.push(hint);
  return failure(statusOf[info.code], info, lines.join('\n'));
}

/** Zod issues of the arguments as the API's `errors` entries (`in: 'arguments'`, unknown keys named one by one). */
export function argumentErrors(issues: readonly z.core.$ZodIssue[]): ParameterError[] {
  return issues.flatMap((issue): ParameterError[] => {
    const name = issue.path.map(String).join('.');
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((key) => ({
        in: 'arguments',
        name: name ? `${name}.${key}` : key,
        message: 'is not a known parameter',
      }));
    }
    return [{ in: 'arguments', name: name || 'arguments', message: issue.message }];
  });
}

/** The markup of each protected block of a body, by its `data-service-id`. */
function protectedMarkup(body: string): Map<string, string> {
  const blocks = new Map<string, string>();
  walk(parseBody(body).childNodes, {
    enter(node) {
      if (!isElement(node)) return false;
      const attrs = new Map(node.attrs.map((a) => [a.name, a.value]));
      const id = attrs.get(PROTECTED_ID_ATTRIBUTE);
      if (attrs.has(PROTECTED_ATTRIBUTE) && id && !blocks.has(id)) {
        blocks.set(id, serializeOuter(node));
        return false;
      }
      return true;
    },
  });
  return blocks;
}

/**
 * The refusal of an edit that touched protected blocks: which blocks, what happened to each, and, for
 * the removed and rewritten ones, the exact markup of the current body to put back.
 */
export function protectedLinksRefusal(info: ToolErrorInfo, currentBody: string | null): ToolFailure {
  const markup = currentBody === null ? new Map<string, string>() : protectedMarkup(currentBody);
  const lines = ['Nothing was changed. The blocks concerned:'];
  for (const e of info.errors ?? []) {
    const id = String(e.id);
    if (e.change === 'forged') {
      lines.push(
        `- ${id}: forged (the new body has a data-service-protected element the current body does not have, ` +
          'or a second copy of one). Only the service places protected blocks: remove the attribute from ' +
          'elements you added and keep exactly one copy of each existing block.',
      );
      continue;
    }
    const what = e.change === 'removed' ? 'removed' : 'rewritten (its tag, attributes, href or text changed)';
    const html = markup.get(id);
    lines.push(
      html
        ? `- ${id}: ${what}. Put it back exactly like this (copy it verbatim; you may move it):\n  ${html}`
        : `- ${id}: ${what}. Copy it verbatim from get_article's body.`,
    );
  }
  lines.push(
    'Keep every element carrying data-service-protected exactly as get_article’s body has it (same tag, ' +
      'attributes, href and text); you may move it and change everything around it.',
  );
  return refusal(info, lines);
}

/**
 * The database cannot be reached for now (a restart, a failover): the same detail as the API's 503, and
 * when to call again. The driver's words (hosts, SQL states) are logged, never in the result.
 */
export function unavailableFailure(): ToolFailure {
  return refusal({ code: 'unavailable', detail: UNAVAILABLE_DETAIL });
}

/** What an unknown failure tells the caller: no internals, the request id to quote. */
export function internalDetail(requestId: string): string {
  return `Something went wrong on our side. Quote the request id ${requestId} if you contact support.`;
}

/** Anything else: no internals, the request id to quote. */
export function internalFailure(requestId: string): ToolFailure {
  const detail = internalDetail(requestId);
  return failure(500, { code: 'internal', detail }, `Error internal: ${detail}`);
}

export function domainInfo(error: unknown): ToolErrorInfo | null {
  if (!isDomainError(error)) return null;
  return {
    code: error.code,
    detail: error.message,
    ...(error.errors ? { errors: wireErrors(error.errors) } : {}),
  };
}
