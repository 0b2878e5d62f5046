/*
 * The JSON texts of long strings an answer writes again and again: an article's body in the answer of
 * each edit of its title (the same string, from the remembered head, edit after edit). Each is
 * escaped once (`JSON.stringify`) and remembered, rather than escaped for every answer.
 *
 * Sized in UTF-16 units, counted as the string's length and its text's; the least recently used go
 * first when over the size. Strings shorter than `minLength` are not remembered: escaping them costs
 * less than remembering them.
 */
export type JsonTexts = {
  /** `JSON.stringify(text)`. */
  of(text: string): string;
  /** The UTF-16 units held now. */
  readonly size: number;
};

type JsonTextsOptions = {
  /** The most it holds, in UTF-16 units (default 8 Mi: about 16 MiB). */
  maxUnits?: number;
  /** Shorter strings are escaped each time (default 4 Ki units). */
  minLength?: number;
};

const JSON_TEXTS_UNITS = 8 * 1024 * 1024;
const JSON_TEXTS_MIN_LENGTH = 4 * 1024;

export function createJsonTexts(opts: JsonTextsOptions = {}): JsonTexts {
  const maxUnits = opts.maxUnits ?? JSON_TEXTS_UNITS;
  const minLength = opts.minLength ?? JSON_TEXTS_MIN_LENGTH;
  // A Map iterates in insertion order: re-inserting on use keeps the least recently used first.
  const texts = new Map<string, string>();
  let size = 0;
  return {
    of(text) {
      if (text.length < minLength) return JSON.stringify(text);
      const known = texts.get(text);
      if (known !== undefined) {
        texts.delete(text);
        texts.set(text, known);
        return known;
      }
      const json = JSON.stringify(text);
      const units = text.length + json.length;
      if (units > maxUnits) return json;
      texts.set(text, json);
      size += units;
      for (const [oldest, oldJson] of texts) {
        if (size <= maxUnits) break;
        texts.delete(oldest);
        size -= oldest.length + oldJson.length;
      }
      return json;
    },
    get size() {
      return size;
    },
  };
}
