import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ALWAYS_NAMED, createStatementNames, createTextMap } from '../../infra/db/statement-cache.ts';

/** A long text: its length, head and tail the same for every `middle` of one length. */
const long = (middle: string): string => `${'h'.repeat(200)}${middle}${'t'.repeat(200)}`;

describe('the text map of the statement cache', () => {
  it('holds what a Map holds, for texts that share a fingerprint or not (property)', () => {
    const text = fc.oneof(
      fc.string({ maxLength: 8 }),
      // Same length, head and tail: one fingerprint, told apart by the whole text.
      fc.stringMatching(/^[ab]{6}$/).map(long),
      fc.stringMatching(/^[ab]{1,3}$/).map(long),
    );
    const op = fc.oneof(
      fc.record({ kind: fc.constant('set' as const), text, value: fc.integer() }),
      fc.record({ kind: fc.constant('get' as const), text }),
      fc.record({ kind: fc.constant('delete' as const), text }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        const map = createTextMap<number>();
        const model = new Map<string, number>();
        for (const o of ops) {
          if (o.kind === 'set') {
            map.set(o.text, o.value);
            model.set(o.text, o.value);
          } else if (o.kind === 'delete') {
            map.delete(o.text);
            model.delete(o.text);
          }
          // A copy of the text, not the same string: as a statement built afresh arrives.
          expect(map.get([...o.text].join(''))).toBe(model.get(o.text));
          expect(map.size).toBe(model.size);
        }
      }),
    );
  });

  it('names two long texts of one fingerprint apart', () => {
    const names = createStatementNames();
    const a = `${ALWAYS_NAMED} ${long('aaaa')}`;
    const b = `${ALWAYS_NAMED} ${long('abab')}`;
    for (const text of [a, b, a, b]) names.nameOf(text);
    const nameA = names.nameOf(a);
    const nameB = names.nameOf(b);
    expect(nameA).toMatch(/^cs_\d+$/);
    expect(nameB).toMatch(/^cs_\d+$/);
    expect(nameA).not.toBe(nameB);
    expect(names.named).toBe(2);
  });
});
