/**
 * Dependency rules for src/, run by `npm run lint` through scripts/check-deps.mjs
 * (which also fails on any cycle between module folders, src/<layer>/<name>/).
 * The tree shows the layers: every module folder sits in one of three,
 * - src/platform/: what every request and every module stands on;
 * - src/engines/: mechanisms that features use (queues, streams, locks, workers, caches, pools);
 * - src/features/: the product's modules. A feature is reached by another only
 *   through its public file, src/features/<feature>/index.ts.
 * Platform never imports an engine or a feature; an engine never imports a feature.
 * Only the application's root files (main.ts, app.module.ts, create-app.ts) sit directly in src/.
 */
const layer = (name) => `^src/${name}/`;
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
      comment: "A feature reaches another only through that feature's public file, src/features/<feature>/index.ts.",
      from: { path: '^src/features/([^/]+)/', pathNot: SPEC },
      to: { path: layer('features'), pathNot: ['^src/features/$1/', '^src/features/[^/]+/index\\.ts$'] },
    },
    {
      name: 'no-own-public-file',
      severity: 'error',
      comment: 'Inside a folder, files import each other directly, never through the public file (it would make import cycles).',
      from: { path: '^(src/[^/]+/[^/]+)/' },
      to: { path: '^$1/index\\.ts$' },
    },
    {
      name: 'platform-not-to-feature',
      severity: 'error',
      comment: 'Platform code knows no feature: features plug in through the platform (decorators, key spaces, config slices).',
      from: { path: layer('platform'), pathNot: SPEC },
      to: { path: layer('features') },
    },
    {
      name: 'platform-not-to-engine',
      severity: 'error',
      comment: 'Platform code stands below the engines: an engine plugs into the platform, never the other way round.',
      from: { path: layer('platform'), pathNot: SPEC },
      to: { path: layer('engines') },
    },
    {
      name: 'engine-not-to-feature',
      severity: 'error',
      comment: 'An engine knows no feature: features declare their queues, consumers and policies to it.',
      from: { path: layer('engines'), pathNot: SPEC },
      to: { path: layer('features') },
    },
    {
      name: 'unclassified-folder',
      severity: 'error',
      comment: 'Every file under src/ sits in a module folder of one layer (src/platform|engines|features/<name>/), or is a root file of the application.',
      from: { path: '^src/', pathNot: ['^src/(platform|engines|features)/[^/]+/', '^src/[^/]+\\.ts$'] },
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
