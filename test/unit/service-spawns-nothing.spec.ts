import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The service (everything under src/ that `nest build` compiles, specs aside) starts no other program: no
 * redis-server, no apt-get. The development Redis that `npm start` supervises lives in scripts/dev/.
 */
describe('the service spawns nothing', () => {
  const SRC = join(__dirname, '..', '..', 'src');
  const files = (readdirSync(SRC, { recursive: true }) as string[]).filter((f) => f.endsWith('.ts') && !f.endsWith('.spec.ts'));

  it('reads the whole source tree', () => {
    expect(files).toEqual(expect.arrayContaining(['main.ts', join('platform', 'redis', 'redis.service.ts')]));
  });

  it('no service file imports child_process', () => {
    const spawning = files.filter((f) =>
      /from ['"](node:)?child_process['"]|require\(['"](node:)?child_process['"]\)/.test(readFileSync(join(SRC, f), 'utf8')),
    );
    expect(spawning).toEqual([]);
  });
});
