import { execFileSync } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';

/** Every file under a media directory, by name, sorted (none when it does not exist yet). */
export async function mediaFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries
    .filter((e) => e.isFile())
    .map((e) => e.name)
    .sort();
}

/**
 * A self-signed certificate (CN images.test) for an HTTPS host on the loopback address `ip`, with
 * openssl: `key.pem` and `cert.pem` in `dir` (trusted by the server through MEDIA_FETCH_CA_FILE).
 */
export function makeCertificate(dir: string, ip: string): void {
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '2',
      '-subj',
      '/CN=images.test',
      '-addext',
      `subjectAltName=IP:${ip}`,
      '-keyout',
      join(dir, 'key.pem'),
      '-out',
      join(dir, 'cert.pem'),
    ],
    { stdio: 'ignore' },
  );
}
