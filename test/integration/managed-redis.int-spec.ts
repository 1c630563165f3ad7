import { ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { LauncherSettingError, ManagedRedisError, managedRedisSettings, probeRedis, waitForOwnRedis } from '../../scripts/dev/managed-redis';
import { freePort } from '../harness/free-port';
import { waitExit } from '../harness/redis-process';
import { RedisServerHandle, startRedisServer } from '../harness/redis-server';

/**
 * The rule that keeps the managed development Redis from ever being someone
 * else's: a port counts as ours only while our child process is alive and the
 * Redis answering there reports the child's process id. (The e2e lifecycle
 * tests see the refusals from the outside; the cases here are the races that a
 * started process cannot be made to hit on purpose.)
 */
describe('managed Redis: is the Redis on the port our child?', () => {
  let foreign: RedisServerHandle;
  const children: ChildProcess[] = [];
  const child = (cmd: string, args: string[]) => {
    const c = spawn(cmd, args, { stdio: 'ignore' });
    children.push(c);
    return c;
  };

  beforeAll(async () => {
    foreign = await startRedisServer();
  });

  afterAll(async () => {
    for (const c of children) {
      c.kill('SIGKILL');
      await waitExit(c);
    }
    await foreign?.destroy();
  });

  it('probeRedis tells a Redis (with its pid) from a closed port', async () => {
    const probe = await probeRedis(foreign.port, 2_000);
    expect(probe).toMatchObject({ kind: 'redis', pid: expect.any(Number), version: expect.stringMatching(/^\d+\.\d+/) });
    expect(await probeRedis(await freePort(), 2_000)).toEqual({ kind: 'refused' });
  });

  it('accepts our own child redis-server once it answers with its pid; refuses, within the time limit, a port where another Redis answers while our child is alive', async () => {
    const port = await freePort();
    const own = child('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no']);
    await expect(waitForOwnRedis(port, own, 10_000)).resolves.toBeUndefined();

    const { pid } = (await probeRedis(foreign.port, 2_000)) as { pid: number };
    const alive = child('sleep', ['30']); // alive, never listens: only the foreign Redis answers on its port
    const started = Date.now();
    const err = await waitForOwnRedis(foreign.port, alive, 1_500).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ManagedRedisError);
    expect((err as Error).message).toContain(`127.0.0.1:${foreign.port} is already in use by another Redis`);
    expect((err as Error).message).toContain(`(pid ${pid})`);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_500);
    expect(Date.now() - started).toBeLessThan(6_000);
  });

  it('refuses at once when our child exits because the port is taken, naming what holds it', async () => {
    const loser = child('redis-server', ['--port', String(foreign.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no']);
    const started = Date.now();
    const err = await waitForOwnRedis(foreign.port, loser, 30_000).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ManagedRedisError);
    expect((err as Error).message).toMatch(/is already in use by another Redis .*REDIS_MANAGED_PORT/);
    expect(loser.exitCode).not.toBeNull(); // it really did exit (bind: Address already in use)
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});

describe('managed Redis: the launcher settings', () => {
  it('defaults to 127.0.0.1:6380 with its data in .data/redis', () => {
    expect(managedRedisSettings({})).toEqual({ port: 6380, dir: resolve('.data/redis') });
    expect(managedRedisSettings({ REDIS_MANAGED_PORT: '', REDIS_MANAGED_DIR: '' })).toEqual({ port: 6380, dir: resolve('.data/redis') });
    expect(managedRedisSettings({ REDIS_MANAGED_PORT: '6390', REDIS_MANAGED_DIR: '/tmp/x' })).toEqual({ port: 6390, dir: '/tmp/x' });
  });

  it.each(['80', '1023', '65536', 'eighty', '6380.5', '-6380'])('refuses REDIS_MANAGED_PORT=%s, naming the variable', (port) => {
    const err = (() => {
      try {
        return managedRedisSettings({ REDIS_MANAGED_PORT: port });
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(LauncherSettingError);
    expect((err as Error).message).toMatch(/^REDIS_MANAGED_PORT must be a port from 1024 to 65535/);
  });
});
