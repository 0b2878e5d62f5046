import { describe, expect, it } from 'vitest';
import { metadataTextProblem, parameterTextProblem } from '../../apps/server/oauth/input-rules.ts';
import { isWebUrl, textProblem, WebUrl } from '../../domain/input.ts';

describe('text the authorization server refuses', () => {
  it.each([
    ['a NUL', 'a\u0000b', 'contains the control character U+0000'],
    ['a tab', 'a\tb', 'contains the control character U+0009'],
    ['a line feed', 'a\nb', 'contains the control character U+000A'],
    ['an escape', '\u001b[31m', 'contains the control character U+001B'],
    ['DEL', 'a\u007f', 'contains the control character U+007F'],
    ['a C1 control', 'a\u0085', 'contains the control character U+0085'],
    ['a lone high surrogate', 'a\ud83d', 'contains an unpaired surrogate (not valid Unicode text)'],
    ['a lone low surrogate', '\ude00a', 'contains an unpaired surrogate (not valid Unicode text)'],
    [
      'surrogates in the wrong order',
      '\ude00\ud83d',
      'contains an unpaired surrogate (not valid Unicode text)',
    ],
  ])('refuses %s', (_name, text, problem) => {
    expect(textProblem(text, { lines: false })).toBe(problem);
  });

  it.each([
    'Claude',
    'Ассистент 助手',
    'Robot 🤖 (a pair of surrogates)',
    'https://assistant.example/cb?x=1&y=%00',
    'a\u00a0non-breaking space',
    '',
  ])('accepts %j', (text) => {
    expect(textProblem(text, { lines: false })).toBeNull();
  });
});

describe('client metadata', () => {
  it('names the field, with its index in an array and its path in an object', () => {
    expect(metadataTextProblem({ client_name: 'ok', logo_uri: 'https://a.example/\u0000' })).toBe(
      'logo_uri contains the control character U+0000',
    );
    expect(metadataTextProblem({ redirect_uris: ['https://a.example/cb', 'https://b.example/\ud800'] })).toBe(
      'redirect_uris[1] contains an unpaired surrogate (not valid Unicode text)',
    );
    expect(metadataTextProblem({ jwks: { keys: [{ kid: 'k\u0001' }] } })).toBe(
      'jwks.keys[0].kid contains the control character U+0001',
    );
    expect(metadataTextProblem({ jwks: { 'bad\u0000': 1 } })).toBe(
      'a property name in jwks contains the control character U+0000',
    );
  });

  it('accepts clean metadata of every type', () => {
    expect(
      metadataTextProblem({
        client_name: 'Claude 🤖',
        redirect_uris: ['https://claude.ai/api/mcp/auth_callback'],
        require_auth_time: false,
        default_max_age: 60,
        jwks: { keys: [] },
        software_id: undefined,
      }),
    ).toBeNull();
  });
});

describe('request parameters', () => {
  it('names the parameter, or says a name is bad', () => {
    expect(parameterTextProblem(new URLSearchParams('state=a%00b&scope=x'))).toBe(
      'parameter state contains the control character U+0000',
    );
    expect(parameterTextProblem(new URLSearchParams('st%01ate=a'))).toBe(
      'a parameter name contains the control character U+0001',
    );
    expect(parameterTextProblem(new URLSearchParams('state=a&state=b%0A'))).toBe(
      'parameter state contains the control character U+000A',
    );
  });

  it('accepts ordinary parameters', () => {
    expect(
      parameterTextProblem(
        new URLSearchParams('response_type=code&scope=content%3Aread+content%3Awrite&state=%C3%A9'),
      ),
    ).toBeNull();
  });
});

describe('text with lines (bodies, reasons)', () => {
  it('lets tab, line feed and carriage return through, and nothing else of the controls', () => {
    expect(textProblem('one\r\n\ttwo', { lines: true })).toBeNull();
    expect(textProblem('form\ffeed', { lines: true })).toBe('contains the control character U+000C');
    expect(textProblem('nul\u0000', { lines: true })).toBe('contains the control character U+0000');
  });
});

describe('web addresses (sites, articles, featured images, backlinks)', () => {
  it.each([
    ['javascript:alert(1)'],
    ['JaVaScRiPt:alert(1)'],
    [' javascript:alert(1)'],
    ['java\tscript:alert(1)'],
    ['\u0001https://x.example/'],
    ['data:text/html,x'],
    ['vbscript:msgbox(1)'],
    ['//evil.example/'],
    ['https:evil.example'],
    ['https:\\\\evil.example'],
    ['https://'],
    ['https://a.example/ b'],
    ['https://a.example/\u00a0'],
    ['mailto:a@b.example'],
    ['/path'],
    [''],
  ])('refuses %j', (url) => {
    expect(isWebUrl(url)).toBe(false);
    expect(WebUrl.safeParse(url).success).toBe(false);
  });

  it.each([
    ['http://a.example'],
    ['https://a.example/b?c=d#e'],
    ['HTTP://A.EXAMPLE/'],
    ['https://[::1]:8443/x'],
  ])('accepts %j', (url) => {
    expect(isWebUrl(url)).toBe(true);
    expect(WebUrl.parse(url)).toBe(url);
  });
});
