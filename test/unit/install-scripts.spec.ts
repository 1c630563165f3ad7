import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Install-time scripts run on purpose: every package of the lock file that has one (preinstall, install, postinstall)
 * is named in package.json `allowScripts`, allowed (true) or denied (false), so `npm ci` lists nothing unreviewed.
 * The telemetry postinstall (@scarf/scarf, pulled in by swagger-ui-dist) is denied, and switched off through
 * `scarfSettings` too: npm 11 still runs denied scripts (the field is advisory until npm 12), and Scarf's own
 * setting makes its script exit without sending anything.
 */
const root = join(__dirname, '..', '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  allowScripts?: Record<string, boolean>;
  scarfSettings?: { enabled?: boolean };
};
const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, { version?: string; hasInstallScript?: boolean }>;
};

/** `node_modules/a/node_modules/@s/b` → `@s/b`. */
const nameOf = (path: string) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length);
/** `pkg`, `@s/pkg`, `pkg@1.2.3` or `@s/pkg@1` → the package name. */
const keyName = (key: string) => key.replace(/(?!^)@.*$/, '');

const withScripts = Object.entries(lock.packages)
  .filter(([path, p]) => path !== '' && p.hasInstallScript)
  .map(([path, p]) => ({ name: nameOf(path), version: p.version }));
const policy = pkg.allowScripts ?? {};
const declared = new Set(Object.keys(policy).map(keyName));

describe('install-time scripts (package.json allowScripts)', () => {
  it('the lock file has packages with install scripts (the check below has something to check)', () => {
    expect(withScripts.length).toBeGreaterThan(0);
  });

  it('every package with an install script is declared, allowed or denied', () => {
    const undeclared = withScripts.filter((p) => !declared.has(p.name)).map((p) => `${p.name}@${p.version}`);
    expect(undeclared).toEqual([]);
  });

  it('declares no package the lock file no longer has with an install script', () => {
    const names = new Set(withScripts.map((p) => p.name));
    expect([...declared].filter((n) => !names.has(n))).toEqual([]);
  });

  it('the telemetry postinstall does not run: denied, and disabled by its own setting', () => {
    expect(policy['@scarf/scarf']).toBe(false);
    expect(pkg.scarfSettings?.enabled).toBe(false);
  });
});
