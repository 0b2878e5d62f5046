import { z } from 'zod';
import { invalidField } from './errors.ts';

/*
 * What the service accepts as an id or as text from any face (API, MCP, editor, ingestion). PostgreSQL
 * refuses U+0000 in text and JSON, and a lone surrogate in JSON: such input must be refused where it
 * enters, with the field named, and never reach an event. Control characters have no place in a
 * title, a reason or an id either.
 */

/**
 * An id: what the service makes (`art_06h014k2g711vw3tv0g528qpw8`) and what ingestion may name
 * (`site-42`, `wp:1234`): ASCII letters, digits and `_ . : -`, starting with a letter or a digit, at
 * most 100 characters.
 */
export const ID_MAX_LENGTH = 100;
/** Length, in characters, of a name: an account's, a key's, a staff member's, a site's, an operation's. */
export const NAME_MAX = 200;
/** Length of a domain name (RFC 1035: 253 characters in text form). */
export const DOMAIN_NAME_MAX = 253;
/** Length of an address a request names (a featured image's URL, an assistant's client_id). */
export const URL_MAX = 2048;
export const ID_PATTERN = new RegExp(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,${ID_MAX_LENGTH - 1}}$`);
export const ID_RULE = `must be an id: 1 to ${ID_MAX_LENGTH} letters, digits and _ . : - (starting with a letter or digit)`;

export function isId(value: unknown): value is string {
  return typeof value === 'string' && ID_PATTERN.test(value);
}

/*
 * Control characters (C0, DEL, C1), and the same but tab, line feed and carriage return: a plain
 * (non-`u`) character class, the fastest scan V8 has; lone surrogates are found by isWellFormed
 * (docs/performance.md, "Text checks").
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const ANY_CONTROL = /[\x00-\x1f\x7f-\x9f]/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const CONTROL_BUT_LINES = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]/;

/**
 * Why a text cannot be accepted, naming the character (`contains the control character U+0000`), or
 * null: a control character (C0, DEL, C1; with `lines: true` tab, line feed and carriage return are
 * fine, for bodies and reasons), or a lone surrogate (not Unicode). A body of up to 2 MiB is checked
 * on every edit: two native scans.
 */
export function textProblem(value: string, opts: { lines: boolean }): string | null {
  const control = (opts.lines ? CONTROL_BUT_LINES : ANY_CONTROL).exec(value);
  if (control) {
    const code = control[0].charCodeAt(0);
    return `contains the control character U+${code.toString(16).toUpperCase().padStart(4, '0')}`;
  }
  if (!value.isWellFormed()) return 'contains an unpaired surrogate (not valid Unicode text)';
  return null;
}

/** Refuses text with a control character or a lone surrogate as `invalid_request`, naming the field. */
export function requireText(name: string, value: string | null | undefined, opts: { lines: boolean }): void {
  if (value === null || value === undefined) return;
  const problem = textProblem(value, opts);
  if (problem) throw invalidField(`The ${name} ${problem}`, name, problem);
}

/*
 * A web address the service stores and shows as a link: a site's, an article's, a featured image's,
 * a backlink's source and target. Absolute http or https, written as it is meant: a browser strips
 * leading spaces and controls and skips tabs and line breaks anywhere, so ` javascript:` or
 * `java\tscript:` would be read otherwise than they look; such values are refused, not cleaned.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point.
const WEB_URL = /^https?:\/\/[^\s\x00-\x1f\x7f-\x9f]+$/i;
export const WEB_URL_RULE = 'must be an absolute http or https URL (no spaces or control characters)';

/** Whether a value is an absolute http(s) URL a browser reads as written (`WEB_URL_RULE`). */
export function isWebUrl(value: string): boolean {
  return WEB_URL.test(value) && URL.canParse(value);
}

/** `isWebUrl` as a schema: every entry of a web address (events, ingestion lines) uses this one. */
export const WebUrl = z.string().refine(isWebUrl, { message: WEB_URL_RULE });
