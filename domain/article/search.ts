/*
 * Full-text search over an account's articles: the bounds of a search and how a match is shown. The
 * words are found by PostgreSQL (a weighted tsvector of the body, title and target keyword, and
 * `websearch_to_tsquery`); its `ts_headline` marks the matched words in an excerpt of the body, which
 * `snippetOf` turns into plain text and the character ranges of the marks.
 */

/** The longest search text, in characters. */
export const SEARCH_QUERY_MAX = 200;

/**
 * The most matches a search ranks: of more, the newest this many (by publication, then id) are ranked
 * and counted. A search that matches more than this is not telling articles apart; more words, a site,
 * a status or dates narrow it.
 */
export const SEARCH_RANKED_MAX = 1000;

/**
 * How much of a body's start a snippet is looked for in first, in characters: `ts_headline` parses all
 * the text it is given (about 0.1 µs a byte), and the matched words of a search are most often near
 * the start; only when none is there is the whole body read.
 */
export const SNIPPET_SEARCHED_FIRST = 1024;

/** The longest snippet a match shows, in characters (UTF-16 code units, never splitting a pair). */
export const SNIPPET_MAX = 200;

/** What `ts_headline` puts before and after a matched word: control characters no body may contain. */
export const MARK_START = '\u0001';
export const MARK_END = '\u0002';

/** The text search configuration when none is configured (SEARCH_LANGUAGE). */
export const SEARCH_LANGUAGE_DEFAULT = 'english';

/** Punctuation that follows a word without a space. */
const CLOSING = /^[.,;:!?)\]]$/;

/** An excerpt of a body with the matched words as `[start, end)` ranges into it. */
export type Snippet = { snippet: string; highlights: [number, number][] };

const ENTITIES: Readonly<Record<string, string>> = {
  amp: '&',
  lt: '<',
  gt: '>',
  quot: '"',
  apos: "'",
  nbsp: ' ',
};

/** A character reference of stored HTML as its text (unknown names stay as written). */
function decodeEntity(entity: string, name: string): string {
  if (name.startsWith('#')) {
    const code =
      name[1] === 'x' || name[1] === 'X' ? Number.parseInt(name.slice(2), 16) : Number(name.slice(1));
    return Number.isInteger(code) && code > 0 && code <= 0x10ffff && (code < 0xd800 || code > 0xdfff)
      ? String.fromCodePoint(code)
      : entity;
  }
  return ENTITIES[name] ?? entity;
}

/**
 * The plain-text snippet of a headline `ts_headline` made from an HTML body with `MARK_START` and
 * `MARK_END` around matched words (its tags replaced by spaces): character references decoded,
 * whitespace collapsed (none left before a point, comma or closing bracket), the marks
 * taken out and their places kept as ranges, cut to `SNIPPET_MAX` characters (an ellipsis at the end
 * when cut) without splitting a surrogate pair; a range the cut crosses ends at the cut.
 */
export function snippetOf(headline: string): Snippet {
  const decoded = headline.replace(/&(#[0-9]+|#[xX][0-9a-fA-F]+|[a-zA-Z]+);/g, decodeEntity);
  let text = '';
  const highlights: [number, number][] = [];
  let open: number | null = null;
  let space = false;
  for (const char of decoded) {
    if (char === MARK_START) {
      if (space && text !== '') text += ' ';
      space = false;
      open = text.length;
    } else if (char === MARK_END) {
      if (open !== null && text.length > open) highlights.push([open, text.length]);
      open = null;
    } else if (/\s/.test(char)) {
      space = true;
    } else {
      // A tag before a point or comma (`<a>services</a>.`) leaves a space no reader wrote.
      if (space && text !== '' && !CLOSING.test(char)) text += ' ';
      space = false;
      text += char;
    }
  }
  if (text.length <= SNIPPET_MAX) return { snippet: text, highlights };
  let end = SNIPPET_MAX - 1;
  // Never end between the two halves of a surrogate pair.
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1;
  const cut = `${text.slice(0, end).trimEnd()}…`;
  const limit = cut.length - 1;
  return {
    snippet: cut,
    highlights: highlights
      .filter(([start]) => start < limit)
      .map(([start, stop]): [number, number] => [start, Math.min(stop, limit)]),
  };
}
