/**
 * Dependency rules for src/, run by `npm run lint` through scripts/check-deps.mjs
 * (which also fails on any cycle between the folders directly under src/).
 * Every folder under src/ is one of three layers:
 * - platform: what every request and every module stands on;
 * - engines: mechanisms that features use (queues, streams, locks, workers, caches, pools);
 * - features: the product's modules. A feature is reached by another only
 *   through its public file, src/<feature>/index.ts.
 * Platform and engines never import a feature. A new folder is added to one of
 * the lists below (an unlisted folder fails the `unclassified-folder` rule).
 */
const PLATFORM = ['kernel', 'errors', 'common', 'config', 'redis', 'scripts', 'http', 'auth', 'rate-limit', 'metrics', 'health', 'diagnostics'];
const ENGINES = ['delay-queue', 'streams', 'workers', 'locks', 'cache', 'sharded-pool'];
const FEATURES = ['messages', 'orders', 'close-reminder', 'seckill', 'red-envelope', 'wallet'];

const under = (folders) => `^src/(${folders.join('|')})/`;
/** Specs may reach anything they prove (the key-space proof imports every module's keys). */
const SPEC = '\\.spec\\.ts$';

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'No file imports itself through others (type-only imports included).',
      from: {},
      to: { circular: true },
    },
    {
      name: 'feature-through-public-file',
      severity: 'error',
      comment: "A feature reaches another only through that feature's public file, src/<feature>/index.ts.",
      from: { path: `^src/(${FEATURES.join('|')})/`, pathNot: SPEC },
      to: { path: under(FEATURES), pathNot: ['^src/$1/', `^src/(${FEATURES.join('|')})/index\\.ts$`] },
    },
    {
      name: 'no-own-public-file',
      severity: 'error',
      comment: 'Inside a folder, files import each other directly, never through the public file (it would make import cycles).',
      from: { path: '^src/([^/]+)/' },
      to: { path: '^src/$1/index\\.ts$' },
    },
    {
      name: 'platform-not-to-feature',
      severity: 'error',
      comment: 'Platform code knows no feature: features plug in through the platform (decorators, key spaces, config slices).',
      from: { path: under(PLATFORM), pathNot: SPEC },
      to: { path: under(FEATURES) },
    },
    {
      name: 'engine-not-to-feature',
      severity: 'error',
      comment: 'An engine knows no feature: features declare their queues, consumers and policies to it.',
      from: { path: under(ENGINES), pathNot: SPEC },
      to: { path: under(FEATURES) },
    },
    {
      name: 'unclassified-folder',
      severity: 'error',
      comment: 'Every folder under src/ is listed as platform, engine or feature in .dependency-cruiser.cjs.',
      from: { path: '^src/[^/]+/', pathNot: under([...PLATFORM, ...ENGINES, ...FEATURES]) },
      to: {},
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '\\.d\\.ts$' },
    // Type-only imports count: a type import is still a dependency between folders.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
