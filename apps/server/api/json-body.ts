import type { FastifyInstance } from 'fastify';
import { parameterError } from '../../../domain/errors.ts';

export const MAX_JSON_DEPTH = 256;

/**
 * How deeply arrays and objects nest in a JSON text, found in one pass without parsing it. Strings
 * (most of an article's JSON: its body) are skipped with `indexOf` to their closing quote, one not
 * preceded by an odd number of backslashes, rather than read character by character.
 */
export function jsonDepth(text: string): number {
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
      if (++openers > limit) return jsonDepth(text) > limit;
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

/**
 * JSON request bodies: a body nested deeper than 256 levels is refused before it is parsed (a
 * deep enough one would exhaust the parser's stack), malformed JSON is a 400 that says where.
 */
export function installJsonBodyParser(app: FastifyInstance): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const text = body as string;
    if (nestsDeeperThan(text, MAX_JSON_DEPTH)) {
      done(
        parameterError(`The JSON body is nested deeper than ${MAX_JSON_DEPTH} levels`, [
          { in: 'body', name: 'body', message: `must not nest deeper than ${MAX_JSON_DEPTH} levels` },
        ]),
        undefined,
      );
      return;
    }
    try {
      done(null, JSON.parse(text));
    } catch (error) {
      done(
        parameterError(`The body is not valid JSON: ${(error as Error).message}`, [
          { in: 'body', name: 'body', message: 'must be valid JSON' },
        ]),
        undefined,
      );
    }
  });
}
