import { type Browser, chromium } from 'playwright-core';

/**
 * Debian's headless Chromium, as every page test drives it: no sandbox (the tests run as root) and no
 * background networking (this machine's closed network refuses those connections, many at a time).
 * `args` adds switches (`--ignore-certificate-errors` for a local HTTPS image host).
 */
export function launchBrowser(args: string[] = []): Promise<Browser> {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-background-networking', ...args],
    headless: true,
  });
}
