import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/**
 * Every relative link in the README and the docs resolves: the file (or
 * folder) exists, and a `#fragment` names a heading of the target, slugged
 * as GitHub does. External links are not fetched.
 */
const ROOT = resolve(__dirname, '../..');

function markdownFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return markdownFiles(path);
    return name.endsWith('.md') ? [path] : [];
  });
}

const FILES = [...['README.md', 'CONTRIBUTING.md', 'CHANGELOG.md'].map((f) => join(ROOT, f)), ...markdownFiles(join(ROOT, 'docs'))];

/** GitHub's heading anchor: lower case, punctuation dropped (but `-` and `_`), spaces to `-`. */
export const slug = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');

function anchorsOf(file: string): Set<string> {
  const text = readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '');
  return new Set([...text.matchAll(/^#{1,6}\s+(.+)$/gm)].map((m) => slug(m[1])));
}

/** `[text](target)` and `![alt](target)` outside code blocks and inline code. */
function linksOf(file: string): string[] {
  const text = readFileSync(file, 'utf8')
    .replace(/```[\s\S]*?```/g, '')
    .replace(/`[^`\n]*`/g, '');
  return [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]).filter((t) => !/^[a-z]+:/i.test(t));
}

describe('links in the README and the docs', () => {
  it('finds the documents', () => {
    expect(FILES.length).toBeGreaterThan(10);
    for (const f of FILES) expect(existsSync(f)).toBe(true);
  });

  it.each(FILES.map((f) => [relative(ROOT, f), f]))('%s: every relative link resolves', (_name, file) => {
    const broken: string[] = [];
    for (const link of linksOf(file)) {
      const [path, fragment] = link.split('#') as [string, string | undefined];
      const target = path === '' ? file : resolve(dirname(file), decodeURIComponent(path));
      if (!existsSync(target)) broken.push(`${link} (no such file)`);
      else if (fragment && target.endsWith('.md') && !anchorsOf(target).has(fragment)) broken.push(`${link} (no such heading)`);
    }
    expect(broken).toEqual([]);
  });

  it('slugs headings as GitHub does', () => {
    expect(slug('`locks`: acquire/release and hand-off')).toBe('locks-acquirerelease-and-hand-off');
    expect(slug('Redis topologies')).toBe('redis-topologies');
  });
});
