import { parse } from 'node:querystring';
import { Transform } from 'node:stream';

/*
 * The one parser of the web pages' form bodies (`application/x-www-form-urlencoded`). Its cost is linear
 * in the body and bounded by the field cap:
 * - the fields are counted first (one scan for `&`, stopping at the cap + 1): a body of more than
 *   FORM_FIELDS_MAX fields is refused before anything is decoded. The pages count them as the body
 *   arrives (`countingFields`): from the chunk that holds the field over the cap on, the body is read
 *   and dropped, never gathered nor decoded (a megabytes long `a&a&…` costs little more than its
 *   transfer);
 * - the fields are then decoded by `node:querystring` (one pass, `maxKeys` set to the cap as well);
 * - a field given twice is refused: no form of the service sends a name twice, and which copy counts
 *   would otherwise be up to whoever reads it.
 * The result has no prototype: a field named `__proto__` or `constructor` is only a field.
 */

/** The most fields a form body may have (the largest form, a webhook endpoint's, has 9). */
export const FORM_FIELDS_MAX = 32;

/** The most bytes of a form body, but the editor's (EDITOR_FORM_LIMIT in editor.ts). */
export const FORM_BODY_MAX = 16 * 1024;

/** A form's fields by name: each given once, as text. */
export type FormFields = Record<string, string>;

/** Why a form body was refused, in words a page can show. */
export class FormRefused extends Error {
  /** The status fastify answers with (the pages render it, see refusal.ts). */
  readonly statusCode = 400;
  readonly code = 'FORM_REFUSED';
  readonly reason: 'too_many_fields' | 'repeated_field';
  constructor(message: string, reason: FormRefused['reason']) {
    super(message);
    this.name = 'FormRefused';
    this.reason = reason;
  }
}

export function isFormRefused(error: unknown): error is FormRefused {
  return error instanceof FormRefused;
}

/** How many `&`-separated fields `body` has, counting no further than `stopAfter`. */
function countFields(body: string, stopAfter: number): number {
  if (body.length === 0) return 0;
  let count = 1;
  for (let at = body.indexOf('&'); at !== -1 && count <= stopAfter; at = body.indexOf('&', at + 1)) {
    count += 1;
  }
  return count;
}

const AMPERSAND = 0x26;

/** What countingFields passes on, and how many bytes it was given (fastify's body limit and length checks read it). */
export type CountedBody = Transform & { receivedEncodedLength: number };

/**
 * A stream a form body passes through as it is until the chunk where the body gets more than
 * `maxFields` fields (`&` separators: one fewer than the fields); the chunks after it are read and
 * dropped. parseForm then refuses what was passed on, once the whole body has arrived: a sender is
 * answered when it has sent its body, not while it is still sending (a connection closed under a
 * sender can lose the answer).
 */
export function countingFields(maxFields: number = FORM_FIELDS_MAX): CountedBody {
  let separators = 0;
  const counted = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      counted.receivedEncodedLength += chunk.length;
      if (separators >= maxFields) {
        callback();
        return;
      }
      for (let at = chunk.indexOf(AMPERSAND); at !== -1; at = chunk.indexOf(AMPERSAND, at + 1)) {
        if (++separators >= maxFields) break;
      }
      callback(null, chunk);
    },
  }) as CountedBody;
  counted.receivedEncodedLength = 0;
  return counted;
}

/**
 * A form body's fields; throws FormRefused for more than `maxFields` fields or a field given twice.
 * `+` is a space, percent-escapes are UTF-8 (an invalid sequence becomes U+FFFD), a field without `=`
 * is empty.
 */
export function parseForm(body: string, maxFields: number = FORM_FIELDS_MAX): FormFields {
  if (countFields(body, maxFields) > maxFields) {
    throw new FormRefused(`The form has more than ${maxFields} fields.`, 'too_many_fields');
  }
  const parsed = parse(body, '&', '=', { maxKeys: maxFields });
  const fields: FormFields = Object.create(null);
  for (const name of Object.keys(parsed)) {
    const value = parsed[name];
    if (typeof value !== 'string') {
      throw new FormRefused(
        `The form has the field “${name.slice(0, 100)}” more than once.`,
        'repeated_field',
      );
    }
    fields[name] = value;
  }
  return fields;
}
