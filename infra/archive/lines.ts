import { ArchiveRefused } from './format.ts';

/*
 * The lines of an archive's NDJSON part, read in time linear in its bytes: a line's pieces are kept as
 * the chunks they came in and joined once, when its line feed arrives (never the rest of the part
 * joined and split again on every chunk), and decoded as UTF-8 whole, so that a character cut by a
 * chunk's end comes out as it was written.
 */

/**
 * The longest line an archive may hold, in bytes. The longest an export writes is an event whose
 * `data` PostgreSQL stores as jsonb, which it holds to 256 MiB; its text in the archive adds JSON's
 * escapes. (A body of 2 MiB alone makes a line of at most 4 MiB, but an edit's `sanitized` list, what
 * the sanitiser removed with the path of each, can be a hundred times its body.) 384 MiB leaves that
 * margin and stays below the longest string Node holds (512 MiB of characters).
 */
export const LINE_MAX = 384 * 1024 * 1024;

/** One line: its text (without the line feed), its number in the part (from 1) and its bytes. */
export type Line = { readonly text: string; readonly n: number; readonly bytes: number };

/**
 * The lines of `body`, each ended by a line feed. `where` names the part in errors. A line longer than
 * `max` bytes is refused as soon as that many bytes of it arrived, one that is not UTF-8 when it ends,
 * and a body whose last line has no line feed at its end.
 */
export async function* linesOf(
  body: AsyncIterable<Buffer>,
  where: string,
  max: number = LINE_MAX,
): AsyncGenerator<Line> {
  const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let n = 0;
  const tooLong = (line: number): ArchiveRefused =>
    new ArchiveRefused(
      `${where} line ${line} is longer than ${max} bytes, more than any line an export writes: the archive is not one an export made`,
    );
  for await (const chunk of body) {
    let start = 0;
    for (let feed = chunk.indexOf(10, start); feed !== -1; feed = chunk.indexOf(10, start)) {
      n += 1;
      const piece = chunk.subarray(start, feed);
      const bytes = pendingBytes + piece.length;
      if (bytes > max) throw tooLong(n);
      const whole = pending.length === 0 ? piece : Buffer.concat([...pending, piece], bytes);
      pending = [];
      pendingBytes = 0;
      let text: string;
      try {
        text = decoder.decode(whole);
      } catch {
        throw new ArchiveRefused(`${where} line ${n} is not UTF-8 text: the archive is damaged`);
      }
      yield { text, n, bytes };
      start = feed + 1;
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      if (pendingBytes + rest.length > max) throw tooLong(n + 1);
      pending.push(rest);
      pendingBytes += rest.length;
    }
  }
  if (pendingBytes > 0)
    throw new ArchiveRefused(`${where} does not end with a whole line: the archive is damaged`);
}
