/**
 * The browser tier (`npm test` runs it after Jest's projects; `npm run test:browser` alone): Swagger UI at /docs driven
 * in a headless Chromium, the system's (Debian's `chromium` package; CHROMIUM_PATH to point elsewhere), against the
 * built service.
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
