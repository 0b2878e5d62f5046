import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { csvField, csvText } from '../../apps/server/web/csv.ts';

/*
 * The one CSV writer of every export (the staff timeline, the site report): RFC 4180 with CRLF, and
 * OWASP's guard against formula injection: a field that a spreadsheet could read as a formula starts
 * with `'`, and a field holding a separator of any locale (`,` `;` tab), a quote or a line break is
 * quoted, so no spreadsheet splits it into a cell that starts with `=`.
 */

/** The cells a spreadsheet splitting on `separator` makes of one CSV record (quoted fields as RFC 4180). */
function parseRecord(line: string, separator: string): string[] {
  const fields: string[] = [];
  let i = 0;
  while (i <= line.length) {
    if (line[i] === '"') {
      let value = '';
      i++;
      for (;;) {
        const quote = line.indexOf('"', i);
        if (quote < 0) {
          // An unclosed quote (a reader with another separator) takes the rest of the line.
          value += line.slice(i);
          i = line.length;
          break;
        }
        value += line.slice(i, quote);
        if (line[quote + 1] === '"') {
          value += '"';
          i = quote + 2;
        } else {
          i = quote + 1;
          break;
        }
      }
      // Text after the closing quote (a reader with another separator) runs on to its separator.
      const end = line.indexOf(separator, i);
      const stop = end < 0 ? line.length : end;
      fields.push(value + line.slice(i, stop));
      i = stop + 1;
    } else {
      const end = line.indexOf(separator, i);
      const stop = end < 0 ? line.length : end;
      fields.push(line.slice(i, stop));
      i = stop + 1;
    }
  }
  return fields;
}

const TRIGGERS = ['=', '+', '-', '@', '\t', '\r', '\n', '＝', '＋', '－', '＠'];
/** What a spreadsheet would take for a formula: a trigger first, perhaps after spaces. */
const FORMULA = /^\s*[=+\-@＝＋－＠]/u;
/** What the writer puts behind a `'` at the start of a field (OWASP: also a leading tab or CR). */
const GUARDED_START = /^(?:\s*[=+\-@＝＋－＠]|[\t\r\n])/u;

describe('csvField', () => {
  it.each([
    ['=1+1', "'=1+1"],
    ['+31 20 123', "'+31 20 123"],
    ['-2+3', "'-2+3"],
    ['@SUM(A1)', "'@SUM(A1)"],
    ['\t=1', `"'\t'=1"`],
    ['\r=1', `"'\r'=1"`],
    [' =1', "' =1"],
    [' \r=', `"' \r'="`],
    ['＝1+1', "'＝1+1"],
    ['a;=HYPERLINK("http://evil")', `"a;'=HYPERLINK(""http://evil"")"`],
    ['a; -1', `"a; '-1"`],
    ['a;b', '"a;b"'],
    ['a,b', '"a,b"'],
    ['say "hi"', '"say ""hi"""'],
    ['two\nlines', '"two\nlines"'],
    ['tab\there', '"tab\there"'],
    ['plain text', 'plain text'],
    ['art_01jx3k5m7n9p1r3t5v7x9z1b3d', 'art_01jx3k5m7n9p1r3t5v7x9z1b3d'],
    ['2026-11-26T13:00:00.000Z', '2026-11-26T13:00:00.000Z'],
  ])('%j is written %j', (value, written) => {
    expect(csvField(value)).toBe(written);
  });

  it('writes numbers as numbers (a negative count is no formula), and nothing for null', () => {
    expect(csvField(-3)).toBe('-3');
    expect(csvField(12)).toBe('12');
    expect(csvField(null)).toBe('');
    expect(csvField(undefined)).toBe('');
  });

  it('never lets a spreadsheet see a formula, with a comma, a semicolon or a tab as the separator', () => {
    const text = fc.stringMatching(/^[^']{0,12}$/);
    const piece = fc.oneof(fc.constantFrom(...TRIGGERS, ',', ';', '"', ' ', 'x'), text);
    fc.assert(
      fc.property(
        fc.array(
          fc.array(piece, { maxLength: 6 }).map((p) => p.join('')),
          { minLength: 1, maxLength: 4 },
        ),
        (values) => {
          const record = values.map(csvField).join(',');
          // Read back with the writer's separator: the same values (the guard's `'` aside), each one that
          // starts like a formula behind a `'`.
          const read = parseRecord(record, ',');
          expect(read.map((r) => r.replaceAll("'", ''))).toEqual(values);
          expect(read.map((r) => r.startsWith("'"))).toEqual(values.map((v) => GUARDED_START.test(v)));
          // Read by a spreadsheet whose separator is `;` or a tab: no cell starts a formula.
          for (const separator of [';', '\t']) {
            for (const cell of parseRecord(record, separator)) expect(cell).not.toMatch(FORMULA);
          }
        },
      ),
    );
  });
});

describe('csvText', () => {
  it('writes a header and the rows, CRLF after each', () => {
    expect(
      csvText(
        ['a', 'b'],
        [
          ['=x', 1],
          ['y;z', null],
        ],
      ),
    ).toBe(`a,b\r\n'=x,1\r\n"y;z",\r\n`);
  });
});
