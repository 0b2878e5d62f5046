import type { BodyFacts } from '../domain/html/facts.ts';
import type { Layout } from '../domain/html/layout.ts';
import type { HtmlMemory } from '../domain/html/memory.ts';
import type { SanitizeResult } from '../domain/html/sanitize.ts';

/**
 * The html rules' memory (domain/html/memory.ts) of one runtime: the sanitise pool fills it ahead of a
 * command (`rememberSanitized`), the command handler passes it to the decider, the projectors read the
 * facts the decider left. One memory per thread: a worker of the pool has its own.
 *
 * Sized in bytes, counted as the length of every string it holds: each body (the key), the sanitised
 * result worked out ahead for it (its html, unless the same string, and what was removed), the strings
 * of its facts (protected links and forms), and its layout as its length once more (the tree holds the
 * same text). When over the size, the least recently used bodies go first; a body read (its facts) or
 * written is the most recent.
 */
export type HtmlMemoryStore = HtmlMemory & {
  /** Leaves what `sanitizeHtml(input)` gives, worked out elsewhere, for the next `sanitizeHtml(input)`. */
  rememberSanitized(input: string, result: SanitizeResult): void;
  /** Whether a result worked out ahead for `input` is waiting to be handed out. */
  isSanitizedAhead(input: string): boolean;
  /** The bytes held now (as counted above). */
  readonly size: number;
  /** Forgets everything. */
  clear(): void;
};

type HtmlMemoryOptions = {
  /** The most it holds, in bytes as counted above (default 16 MiB). */
  maxBytes?: number;
  /**
   * Layouts of longer bodies (UTF-16 units) are not kept (default 512 Ki): the tree of a body is many
   * times its text, and an edit of a very long body is rare enough to be parsed in full.
   */
  maxLayoutLength?: number;
};

const HTML_MEMORY_BYTES = 16 * 1024 * 1024;
const HTML_MEMORY_MAX_LAYOUT = 512 * 1024;

/** One body and what is remembered of it, in a list from least to most recently used. */
type Entry = {
  readonly key: string;
  ahead: SanitizeResult | undefined;
  facts: BodyFacts | undefined;
  layout: Layout | undefined;
  bytes: number;
  older: Entry | undefined;
  newer: Entry | undefined;
};

export function createHtmlMemory(opts: HtmlMemoryOptions = {}): HtmlMemoryStore {
  const maxBytes = opts.maxBytes ?? HTML_MEMORY_BYTES;
  const maxLayoutLength = opts.maxLayoutLength ?? HTML_MEMORY_MAX_LAYOUT;
  const entries = new Map<string, Entry>();
  let oldest: Entry | undefined;
  let newest: Entry | undefined;
  let size = 0;

  const unlink = (entry: Entry): void => {
    if (entry.older) entry.older.newer = entry.newer;
    else oldest = entry.newer;
    if (entry.newer) entry.newer.older = entry.older;
    else newest = entry.older;
    entry.older = undefined;
    entry.newer = undefined;
  };
  const link = (entry: Entry): void => {
    entry.older = newest;
    if (newest) newest.newer = entry;
    else oldest = entry;
    newest = entry;
  };
  const drop = (entry: Entry): void => {
    unlink(entry);
    entries.delete(entry.key);
    size -= entry.bytes;
  };
  /** The entry of `key`, made the most recent (created if missing). */
  const touch = (key: string): Entry => {
    let entry = entries.get(key);
    if (entry === undefined) {
      entry = {
        key,
        ahead: undefined,
        facts: undefined,
        layout: undefined,
        bytes: 0,
        older: undefined,
        newer: undefined,
      };
      entries.set(key, entry);
    } else {
      unlink(entry);
    }
    link(entry);
    return entry;
  };
  /** Counts an entry again after a change; drops it if it holds nothing or more than the whole size, and the oldest while over it. */
  const resize = (entry: Entry): void => {
    const bytes = bytesOf(entry);
    size += bytes - entry.bytes;
    entry.bytes = bytes;
    const empty = entry.ahead === undefined && entry.facts === undefined && entry.layout === undefined;
    if (empty || bytes > maxBytes) drop(entry);
    while (size > maxBytes && oldest !== undefined) drop(oldest);
  };

  return {
    takeSanitized(input) {
      const entry = entries.get(input);
      const result = entry?.ahead;
      if (entry === undefined || result === undefined) return undefined;
      entry.ahead = undefined;
      resize(entry);
      return result;
    },
    rememberSanitized(input, result) {
      const entry = touch(input);
      entry.ahead = result;
      resize(entry);
    },
    isSanitizedAhead: (input) => entries.get(input)?.ahead !== undefined,
    facts(html) {
      const entry = entries.get(html);
      if (entry?.facts === undefined) return undefined;
      unlink(entry);
      link(entry);
      return entry.facts;
    },
    rememberFacts(html, facts) {
      const entry = touch(html);
      entry.facts = facts;
      resize(entry);
    },
    layout: (html) => entries.get(html)?.layout,
    rememberLayout(html, layout) {
      if (html.length > maxLayoutLength) return;
      const entry = touch(html);
      entry.layout = layout;
      resize(entry);
    },
    *layouts() {
      for (let entry = newest; entry !== undefined; entry = entry.older) {
        if (entry.layout !== undefined) yield [entry.key, entry.layout] as const;
      }
    },
    get size() {
      return size;
    },
    clear() {
      entries.clear();
      oldest = undefined;
      newest = undefined;
      size = 0;
    },
  };
}

function bytesOf(entry: Entry): number {
  const { key, ahead, facts, layout } = entry;
  let bytes = key.length;
  if (ahead !== undefined) {
    if (ahead.html !== key) bytes += ahead.html.length;
    for (const item of ahead.removed) bytes += item.path.length + item.removed.length + item.reason.length;
  }
  if (facts !== undefined) {
    for (const link of facts.protectedLinks) bytes += link.id.length + link.href.length + link.text.length;
    for (const [id, forms] of facts.protectedForms) {
      bytes += id.length;
      for (const form of forms) bytes += form.length;
    }
  }
  if (layout !== undefined) bytes += key.length;
  return bytes;
}
