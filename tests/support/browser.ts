import { type Browser, chromium } from 'playwright-core';

/**
 * The Chromium features playwright-core turns off with its own `--disable-features` switch (its
 * `chromiumSwitches`, as of the version the lockfile pins). Chromium reads only the last of several
 * such switches, so the page tests' switch has to carry these too, and Playwright's is left out
 * (`ignoreDefaultArgs`); tests/support/browser.int.test.ts fails when Playwright's list moves on.
 */
export const PLAYWRIGHT_DISABLED_FEATURES = [
  'AvoidUnnecessaryBeforeUnloadCheckSync',
  'DestroyProfileOnBrowserClose',
  'HttpsUpgrades',
  'HttpsFirstBalancedModeAutoEnable',
  'LensOverlay',
  'MediaRouter',
  'PaintHolding',
  'ThirdPartyStoragePartitioning',
  'AvoidCorsURLLoaderRestartOnRedirect',
  'TcpPortRandomizationWin',
  'OptimizationHints',
  'NetworkTimeServiceQuerying',
  'AimEnabled',
  'PreconnectToSearch',
  'msForceBrowserSignIn',
  'msEdgeUpdateLaunchServicesPreferredVersion',
] as const;

/**
 * The omnibox's popup, a WebUI page (`chrome://omnibox-popup.top-chrome/`, and its AI mode page)
 * that Chromium's headless mode makes for every window, which is every browser context: its
 * renderer's start is about 1.5 s of CPU of a new context's 2.1 (0.6 without it). No page test has
 * an address bar to type in.
 */
export const OMNIBOX_POPUP_FEATURES = ['WebUIOmniboxPopup', 'WebUIOmniboxAimPopup'] as const;

/** The one `--disable-features` switch the page tests' Chromium starts with. */
export const DISABLE_FEATURES = `--disable-features=${[...PLAYWRIGHT_DISABLED_FEATURES, ...OMNIBOX_POPUP_FEATURES].join(',')}`;

/**
 * Debian's headless Chromium, as every page test drives it: no sandbox (the tests run as root), no
 * background networking (this machine's closed network refuses those connections, many at a time)
 * and no omnibox popup (`OMNIBOX_POPUP_FEATURES`). `args` adds switches
 * (`--ignore-certificate-errors` for a local HTTPS image host).
 */
export function launchBrowser(args: string[] = []): Promise<Browser> {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-background-networking', DISABLE_FEATURES, ...args],
    ignoreDefaultArgs: [`--disable-features=${PLAYWRIGHT_DISABLED_FEATURES.join(',')}`],
    headless: true,
  });
}
