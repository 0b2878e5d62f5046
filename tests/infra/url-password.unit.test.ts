import { expect, it } from 'vitest';
import { withoutPassword } from '../../infra/url-password.ts';

it('hides the password of a URL and leaves the rest as it was', () => {
  expect(withoutPassword('postgres://app:s3cret@db:5432/content')).toBe('postgres://app:***@db:5432/content');
  expect(withoutPassword('redis://:hunter2@cache:6379/0')).toBe('redis://:***@cache:6379/0');
  expect(withoutPassword('postgres://postgres@127.0.0.1:5432/test')).toBe(
    'postgres://postgres@127.0.0.1:5432/test',
  );
  expect(withoutPassword('not a url')).toBe('(unparsable URL)');
  expect(withoutPassword('::', 'redis://(unparseable)')).toBe('redis://(unparseable)');
});
