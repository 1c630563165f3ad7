/**
 * `npm test`: every tier. Jest's projects (unit, integration, module, e2e), then the browser tier (Swagger UI in a
 * headless Chromium, jest.browser.config.js), both run even when the first fails; the exit code is the first failure's.
 * The browser is the system's: Debian's `chromium`, installed with apt-get when missing, or the one CHROMIUM_PATH names.
 * `npm test -- <jest arguments>` runs Jest alone with them (one file, one project, a name pattern).
 */
import { spawnSync } from 'node:child_process';
import { chromiumPath } from '../../test/browser/chromium-path';
import { aptInstall } from './managed-redis';

const jest = require.resolve('jest/bin/jest');
const run = (args: string[]) => spawnSync(process.execPath, [jest, ...args], { stdio: 'inherit' }).status ?? 1;

function ensureChromium(): void {
  if (chromiumPath()) return;
  console.log("[test] installing Debian's chromium package with apt-get (needs root), for the browser tier...");
  try {
    aptInstall(['chromium']);
  } catch (err) {
    throw new Error(`could not install chromium (${(err as Error).message.split('\n')[0]}): install Chromium or set CHROMIUM_PATH`, { cause: err });
  }
}

const args = process.argv.slice(2);
const tiers = run(args);
if (args.length > 0) process.exit(tiers);
try {
  ensureChromium();
} catch (err) {
  console.error(`[test] browser tier not run: ${(err as Error).message}`);
  process.exit(tiers || 1);
}
const browser = run(['--config', 'jest.browser.config.js']);
process.exit(tiers || browser);
