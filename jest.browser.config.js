/**
 * The browser tier, `npm run test:browser` (CI runs it after `npm test`): Swagger UI at /docs driven in a headless
 * Chromium, the system's (Debian's `chromium` package; CHROMIUM_PATH to point elsewhere), against the built service.
 * Kept out of `npm test`, which needs no browser.
 */
const { projects, reporters } = require('./jest.config.js');
const e2e = projects.find((p) => p.displayName === 'e2e');

/** @type {import('jest').Config} */
module.exports = {
  testTimeout: 120000,
  forceExit: true,
  reporters,
  projects: [{ ...e2e, displayName: 'browser', testMatch: ['<rootDir>/test/browser/**/*.browser-spec.ts'] }],
};
