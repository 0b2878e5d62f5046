import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { rfc3339 } from '../../apps/application/wire.ts';

describe('rfc3339', () => {
  it('writes UTC to the second, as CONTRACT does', () => {
    expect(rfc3339(new Date('2026-11-02T09:30:00.000Z'))).toBe('2026-11-02T09:30:00Z');
    expect(rfc3339(new Date('2026-11-02T11:30:59.999+02:00'))).toBe('2026-11-02T09:30:59Z');
  });

  it('is the ISO form without milliseconds, for any date', () => {
    fc.assert(
      fc.property(
        fc.date({ min: new Date('1970-01-01'), max: new Date('9999-12-31'), noInvalidDate: true }),
        (d) => {
          expect(rfc3339(d)).toBe(d.toISOString().replace(/\.\d{3}Z$/, 'Z'));
        },
      ),
    );
  });
});
