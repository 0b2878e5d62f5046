import { readdir } from 'node:fs/promises';

/** Every file under a media directory, by name, sorted (none when it does not exist yet). */
export async function mediaFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries
    .filter((e) => e.isFile())
    .map((e) => e.name)
    .sort();
}
