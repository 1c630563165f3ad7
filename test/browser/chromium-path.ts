import { existsSync } from 'node:fs';

/** Where Debian's `chromium` package (and others) put the browser. */
const CANDIDATES = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome', '/usr/bin/google-chrome-stable'];

/** The system Chromium: the one CHROMIUM_PATH names, else the first installed candidate; undefined when there is none. */
export const chromiumPath = (): string | undefined => process.env.CHROMIUM_PATH || CANDIDATES.find((p) => existsSync(p));

export const NO_CHROMIUM = `No Chromium found (looked at ${CANDIDATES.join(', ')}); install Debian's: apt-get install chromium, or set CHROMIUM_PATH`;
