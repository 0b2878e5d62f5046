import type { FastifyInstance } from 'fastify';

export const MAX_JSON_DEPTH = 256;

/**
 * How deeply arrays and objects nest in a JSON text, found in one pass without parsing it, up to
 * `stopAbove + 1`: the scan ends at the first bracket that goes deeper than `stopAbove` (a body a
 * million brackets deep is refused after its first few hundred characters). Strings (most of an
 * article's JSON: its body) are skipped with `indexOf` to their closing quote, one not preceded by an
 * odd number of backslashes, rather than read character by character.
 */
export function jsonDepth(text: string, stopAbove = Number.POSITIVE_INFINITY): number {
  let depth = 0;
  let max = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 34) {
      let end = text.indexOf('"', i + 1);
      while (end !== -1 && isEscaped(text, end)) end = text.indexOf('"', end + 1);
      if (end === -1) return max; // an unterminated string: JSON.parse refuses it
      i = end;
    } else if (c === 123 || c === 91) {
      depth++;
      if (depth > max) max = depth;
      if (max > stopAbove) return max;
    } else if (c === 125 || c === 93) depth--;
  }
  return max;
}

/**
 * Whether the JSON text nests deeper than `limit`. A text with at most `limit` opening brackets in all
 * (an article's JSON: a few, however long its body) cannot, and is not scanned: the brackets are
 * counted with `indexOf`, stopping at `limit + 1`.
 */
export function nestsDeeperThan(text: string, limit: number): boolean {
  let openers = 0;
  for (const bracket of ['{', '[']) {
    for (let i = text.indexOf(bracket); i !== -1; i = text.indexOf(bracket, i + 1)) {
      if (++openers > limit) return jsonDepth(text, limit) > limit;
    }
  }
  return false;
}

/** Whether the character at `at` follows an odd number of backslashes. */
function isEscaped(text: string, at: number): boolean {
  let backslashes = 0;
  for (let j = at - 1; j >= 0 && text.charCodeAt(j) === 92; j--) backslashes++;
  return backslashes % 2 === 1;
}

/** Why a JSON body could not be read: it nests deeper than MAX_JSON_DEPTH, or JSON.parse's error. */
export type UnreadableJson = 'nested' | Error;

/**
 * JSON request bodies, for every face: a body nested deeper than MAX_JSON_DEPTH levels is refused
 * before it is parsed (a deep enough one would exhaust the parser's stack). What an unreadable body
 * becomes is the face's: an error to answer with (`{ error }`), or a body its handler answers (`{ body }`).
 */
export function installJsonBodyParser(
  app: FastifyInstance,
  unreadable: (why: UnreadableJson) => { error: Error } | { body: unknown },
): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const text = body as string;
    let outcome: { error: Error } | { body: unknown };
    if (nestsDeeperThan(text, MAX_JSON_DEPTH)) {
      outcome = unreadable('nested');
    } else {
      try {
        done(null, JSON.parse(text));
        return;
      } catch (error) {
        outcome = unreadable(error as Error);
      }
    }
    if ('error' in outcome) done(outcome.error, undefined);
    else done(null, outcome.body);
  });
}
