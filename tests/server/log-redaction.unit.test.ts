import { describe, expect, it } from 'vitest';
import { REDACTED, redactUrl } from '../../apps/server/log-redaction.ts';

describe('redactUrl', () => {
  it.each([
    ['/api/v1/sites?api_key=cs_live_x&page=2', `/api/v1/sites?api_key=${REDACTED}&page=2`],
    ['/api/v1/sites?access_token=abc', `/api/v1/sites?access_token=${REDACTED}`],
    ['/x?token=a&apikey=b&key=c', `/x?token=${REDACTED}&apikey=${REDACTED}&key=${REDACTED}`],
    ['/oauth/callback?code=xyz&state=s', `/oauth/callback?code=${REDACTED}&state=s`],
    [
      '/x?client_secret=s&password=p&Authorization=Bearer%20k',
      `/x?client_secret=${REDACTED}&password=${REDACTED}&Authorization=${REDACTED}`,
    ],
    ['/x?X-Amz-Signature=abc&x=1', `/x?X-Amz-Signature=${REDACTED}&x=1`],
    ['/x?api%5Fkey=abc', `/x?api%5Fkey=${REDACTED}`],
  ])('%s', (url, expected) => {
    expect(redactUrl(url)).toBe(expected);
  });

  it('leaves URLs without secrets as they are', () => {
    for (const url of [
      '/api/v1/sites',
      '/api/v1/sites?page=2&per_page=5',
      '/x?from=2026-01-01&flag',
      '/x?%zz=1',
    ]) {
      expect(redactUrl(url)).toBe(url);
    }
  });
});
