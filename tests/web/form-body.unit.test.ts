import * as querystring from 'node:querystring';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { countingFields, FORM_FIELDS_MAX, FormRefused, parseForm } from '../../apps/server/web/form-body.ts';

vi.mock('node:querystring', async (actual) => {
  const real = await actual<typeof import('node:querystring')>();
  return { ...real, parse: vi.fn(real.parse) };
});

/** What parseForm refuses `body` with, or null. */
function refusal(body: string, max?: number): FormRefused['reason'] | null {
  try {
    parseForm(body, max);
    return null;
  } catch (error) {
    if (error instanceof FormRefused) return error.reason;
    throw error;
  }
}

afterEach(() => {
  vi.mocked(querystring.parse).mockClear();
});

describe('the form parser', () => {
  it('reads fields as a browser sends them: + is a space, UTF-8 escapes, a field without = is empty', () => {
    const fields = parseForm('title=Boiler+care&body=%3Cp%3E%C3%A9t%C3%A9%3C%2Fp%3E&reason&csrf=abc');
    expect({ ...fields }).toEqual({ title: 'Boiler care', body: '<p>été</p>', reason: '', csrf: 'abc' });
    expect({ ...parseForm('') }).toEqual({});
  });

  it('turns broken escapes into U+FFFD: never a lone surrogate, never a throw', () => {
    const fields = parseForm('a=%ED%A0%80&b=%&c=%E0%A4%A');
    for (const value of Object.values(fields)) expect(value.isWellFormed()).toBe(true);
    expect(fields.b).toBe('%');
  });

  it('has no prototype: __proto__ and constructor are plain fields', () => {
    const fields = parseForm('__proto__=x&constructor=y');
    expect(Object.getPrototypeOf(fields)).toBeNull();
    expect(Object.entries(fields)).toContainEqual(['__proto__', 'x']);
    expect(fields.constructor).toBe('y');
    expect(({} as Record<string, unknown>).x).toBeUndefined();
  });

  it(`takes ${FORM_FIELDS_MAX} fields and refuses one more, before decoding anything`, () => {
    const fields = (n: number): string => Array.from({ length: n }, (_, i) => `f${i}=v`).join('&');
    expect(Object.keys(parseForm(fields(FORM_FIELDS_MAX)))).toHaveLength(FORM_FIELDS_MAX);
    vi.mocked(querystring.parse).mockClear();
    expect(refusal(fields(FORM_FIELDS_MAX + 1))).toBe('too_many_fields');
    expect(querystring.parse).not.toHaveBeenCalled();
  });

  it('refuses a megabyte of `a&a&…` by counting, without decoding a field', () => {
    const hostile = 'a&'.repeat(512 * 1024);
    expect(refusal(hostile)).toBe('too_many_fields');
    expect(refusal('&'.repeat(FORM_FIELDS_MAX))).toBe('too_many_fields');
    expect(querystring.parse).not.toHaveBeenCalled();
  });

  it('decodes with a key cap: the decoder never makes more than the cap of fields', () => {
    parseForm('a=1&b=2', 5);
    expect(querystring.parse).toHaveBeenCalledWith('a=1&b=2', '&', '=', { maxKeys: 5 });
  });

  it('refuses a field given twice, whichever copy would have counted', () => {
    expect(refusal('csrf=good&csrf=forged')).toBe('repeated_field');
    expect(refusal('a&a')).toBe('repeated_field');
    expect(refusal('title=x&body=y')).toBeNull();
  });
});

/** What countingFields passes on of `chunks`, and the bytes it says it was given. */
async function throughCounter(chunks: string[], max?: number): Promise<{ passed: string; received: number }> {
  const counted = countingFields(max);
  const out: Buffer[] = [];
  counted.on('data', (chunk: Buffer) => out.push(chunk));
  const ended = new Promise((resolve) => counted.on('end', resolve));
  for (const chunk of chunks) counted.write(Buffer.from(chunk));
  counted.end();
  await ended;
  return { passed: Buffer.concat(out).toString(), received: counted.receivedEncodedLength };
}

/** `text` cut into pieces at the given places. */
function cut(text: string, at: number[]): string[] {
  const places = [...new Set(at.map((a) => a % (text.length + 1)))].sort((a, b) => a - b);
  return [0, ...places].map((from, i) => text.slice(from, places[i] ?? text.length));
}

describe('the field count as a body arrives', () => {
  it(`passes a body of at most ${FORM_FIELDS_MAX} fields whole, however it is cut`, async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.stringMatching(/^[a-z=%0-9+]{0,8}$/), { minLength: 1, maxLength: FORM_FIELDS_MAX }),
        fc.array(fc.nat(), { maxLength: 6 }),
        async (fields, at) => {
          const body = fields.join('&');
          expect(await throughCounter(cut(body, at))).toEqual({ passed: body, received: body.length });
        },
      ),
    );
  });

  it('drops what comes after the chunk with the field over the cap, counts every byte, and the parser refuses it', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 5, max: 200 }),
        fc.array(fc.nat(), { maxLength: 6 }),
        async (n, at) => {
          const body = 'a&'.repeat(n);
          const chunks = cut(body, at);
          const { passed, received } = await throughCounter(chunks, 4);
          expect(received).toBe(body.length);
          // Whole chunks, up to the first one where the body has a 5th field.
          let upTo = 0;
          while ((chunks.slice(0, upTo).join('').match(/&/g)?.length ?? 0) < 4) upTo++;
          expect(passed).toBe(chunks.slice(0, upTo).join(''));
          expect(refusal(passed, 4)).toBe('too_many_fields');
        },
      ),
    );
  });
});
