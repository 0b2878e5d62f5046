import { describe, expect, it } from 'vitest';
import {
  applicationTypeOf,
  isHttpLoopback,
  redirectHostOf,
  redirectUriProblem,
} from '../../apps/server/oauth/client-rules.ts';
import { displayName, grantedAccess } from '../../apps/server/oauth/interactions.ts';

describe('redirect URI rules', () => {
  it.each([
    'https://claude.ai/api/mcp/auth_callback',
    'https://app.example.com:8443/cb?x=1',
    'http://localhost/callback',
    'http://localhost:33418/callback',
    'http://127.0.0.1:5555/callback',
    'http://[::1]:5555/callback',
  ])('accepts %s', (uri) => {
    expect(redirectUriProblem([uri])).toBeNull();
  });

  it.each([
    ['http://localhost.evil.example/callback', /not loopback/],
    ['http://127.0.0.1.nip.io/callback', /not loopback/],
    ['http://localhost@evil.example/callback', /not loopback/],
    ['http://example.com/callback', /not loopback/],
    ['http://10.0.0.5/callback', /not loopback/],
    ['ftp://localhost/callback', /must use https/],
    ['javascript:alert(1)', /must use https/],
    ['cursor://anysphere/callback', /must use https/],
    ['not a uri', /not a valid absolute URI/],
  ])('refuses %s', (uri, why) => {
    expect(redirectUriProblem([uri])).toMatch(why);
  });

  it('refuses a missing or empty list, and one bad URI among good ones', () => {
    expect(redirectUriProblem(undefined)).toMatch(/at least one/);
    expect(redirectUriProblem([])).toMatch(/at least one/);
    expect(redirectUriProblem(['https://ok.example/cb', 'http://bad.example/cb'])).toMatch(/not loopback/);
    expect(redirectUriProblem([42])).toMatch(/strings/);
  });

  it('knows loopback by exact host only', () => {
    expect(isHttpLoopback('http://localhost:1/x')).toBe(true);
    expect(isHttpLoopback('http://[::1]/x')).toBe(true);
    expect(isHttpLoopback('https://localhost/x')).toBe(false);
    expect(isHttpLoopback('http://localhost.evil.example/x')).toBe(false);
    expect(isHttpLoopback('http://127.0.0.2/x')).toBe(false);
  });
});

describe('application type', () => {
  it('a client stating no type with only http loopback redirect URIs is native (RFC 8252)', () => {
    expect(applicationTypeOf(undefined, ['http://127.0.0.1:5555/callback'])).toBe('native');
    expect(applicationTypeOf(undefined, ['http://localhost:1/a', 'http://[::1]:2/b'])).toBe('native');
  });
  it('is web otherwise, and a stated type is kept', () => {
    expect(applicationTypeOf(undefined, ['https://app.example.com/cb'])).toBe('web');
    expect(applicationTypeOf(undefined, ['http://127.0.0.1:1/a', 'https://app.example.com/cb'])).toBe('web');
    expect(applicationTypeOf('native', ['http://localhost:1/a'])).toBe('native');
    expect(applicationTypeOf('web', ['http://localhost:1/a'])).toBe('web');
  });
});

describe('what the consent page shows and grants', () => {
  it('names the redirect host', () => {
    expect(redirectHostOf(['http://127.0.0.1:5555/callback'])).toBe('127.0.0.1:5555');
    expect(redirectHostOf(['https://claude.ai/api/mcp/auth_callback'])).toBe('claude.ai');
  });
  it('grants read, or read and write when write is asked', () => {
    expect(grantedAccess(new Set(['content:read']))).toEqual({ scope: 'content:read', access: 'read' });
    expect(grantedAccess(new Set())).toEqual({ scope: 'content:read', access: 'read' });
    expect(grantedAccess(new Set(['content:write']))).toEqual({
      scope: 'content:read content:write',
      access: 'write',
    });
  });
  it('shows the client name, or its client_id, shortened when very long', () => {
    expect(displayName('  Claude  ', 'abc')).toBe('Claude');
    expect(displayName(undefined, 'https://app.example/client.json')).toBe('https://app.example/client.json');
    expect(displayName('x'.repeat(300), 'abc')).toHaveLength(100);
  });
});
