/**
 * Four tiers (immich-style): unit specs beside the source; integration specs
 * that run Lua scripts, connections and engines against real redis-server
 * processes; module specs that build one feature module alone on a real Redis
 * (test/module); and end-to-end specs that boot the whole app (in process or
 * as the built service).
 * Every Redis the tests use is started by the harness in test/harness.
 */
const { availableParallelism } = require('node:os');

// ts-jest, with the @nestjs/swagger plugin on DTOs and controllers as in `nest build` (see the transformer).
const tsJest = ['<rootDir>/test/support/swagger-jest-transformer.js', { tsconfig: 'tsconfig.json' }];
const base = { testEnvironment: 'node', transform: { '^.+\\.ts$': tsJest }, moduleFileExtensions: ['ts', 'js', 'json'] };

/** @type {import('jest').Config} */
module.exports = {
  // Integration and e2e suites start real redis-server processes; a global option (ignored per project).
  testTimeout: 60000,
  // The suites mostly wait (on redis-server, on the built service they start, on leases and timers): in one process they
  // keep two cores about 20% busy. Three workers on two cores run them in about a third of the time; more cores, more.
  maxWorkers: Math.max(3, availableParallelism() - 1),
  // A failed test that leaves a reconnecting client behind would keep its worker, and the run, alive after the verdict.
  forceExit: true,
  reporters: ['default', '<rootDir>/test/support/summary-reporter.js'],
  projects: [
    { ...base, displayName: 'unit', testMatch: ['<rootDir>/src/**/*.spec.ts', '<rootDir>/test/docs/**/*.spec.ts', '<rootDir>/test/unit/**/*.spec.ts'] },
    { ...base, displayName: 'integration', testMatch: ['<rootDir>/test/integration/**/*.int-spec.ts'] },
    // One feature module built alone on a real Redis, the modules it uses replaced by fakes at their public interface.
    { ...base, displayName: 'module', testMatch: ['<rootDir>/test/module/**/*.module-spec.ts'] },
    { ...base, displayName: 'e2e', testMatch: ['<rootDir>/test/e2e/**/*.e2e-spec.ts'] },
  ],
};
