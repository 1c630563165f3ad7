import type { Redis } from 'ioredis';
import { evalScript } from './eval-script';

/** A stand-in for the two commands evalScript sends; each answers with the next queued outcome. */
function fakeClient(evalsha: Array<unknown>, evalOutcomes: Array<unknown> = []) {
  const calls: Array<[string, unknown[]]> = [];
  const answer = (queue: unknown[]) => {
    const next = queue.shift();
    return next instanceof Error ? Promise.reject(next) : Promise.resolve(next);
  };
  const client = {
    evalsha: (...args: unknown[]) => (calls.push(['evalsha', args]), answer(evalsha)),
    eval: (...args: unknown[]) => (calls.push(['eval', args]), answer(evalOutcomes)),
  };
  return { client: client as unknown as Redis, calls };
}

const def = { sha: 'abc123', source: 'return 1', numberOfKeys: 2 };
const keys = ['k1', 'k2'];
const args = ['a', 7, Buffer.from('b')];

describe('evalScript', () => {
  it('sends EVALSHA with the key count, keys and arguments, and hands the result to onResult', async () => {
    const { client, calls } = fakeClient([[1, 'x']]);
    await expect(evalScript(client, def, keys, args, (r) => ({ got: r }))).resolves.toEqual({ got: [1, 'x'] });
    expect(calls).toEqual([['evalsha', ['abc123', 2, 'k1', 'k2', 'a', 7, Buffer.from('b')]]]);
  });

  it('sends the same call again as EVAL of the source when the node answers NOSCRIPT, and hands on its result', async () => {
    const { client, calls } = fakeClient([new Error('NOSCRIPT No matching script. Please use EVAL.')], [-1]);
    const onResult = jest.fn((r: unknown) => r);
    const onError = jest.fn((err: unknown): unknown => {
      throw err;
    });
    await expect(evalScript(client, def, keys, args, onResult, onError)).resolves.toBe(-1);
    expect(calls).toEqual([
      ['evalsha', ['abc123', 2, 'k1', 'k2', 'a', 7, Buffer.from('b')]],
      ['eval', ['return 1', 2, 'k1', 'k2', 'a', 7, Buffer.from('b')]],
    ]);
    expect(onResult).toHaveBeenCalledTimes(1);
    expect(onError).not.toHaveBeenCalled();
  });

  it('does not retry any other error, and calls onError once with it', async () => {
    const busy = new Error('BUSY Redis is busy running a script');
    const { client, calls } = fakeClient([busy]);
    const onError = jest.fn((err: unknown): unknown => {
      throw new Error(`classified: ${(err as Error).message}`);
    });
    await expect(evalScript(client, def, keys, args, (r) => r, onError)).rejects.toThrow('classified: BUSY');
    expect(calls.map(([cmd]) => cmd)).toEqual(['evalsha']);
    expect(onError).toHaveBeenCalledTimes(1);
    expect(onError).toHaveBeenCalledWith(busy);
  });

  it('calls onError once with the EVAL failure when the retry fails too', async () => {
    const down = new Error('Connection is closed.');
    const { client } = fakeClient([new Error('NOSCRIPT No matching script.')], [down]);
    const onError = jest.fn((err: unknown): unknown => {
      throw err;
    });
    await expect(evalScript(client, def, keys, args, (r) => r, onError)).rejects.toBe(down);
    expect(onError).toHaveBeenCalledTimes(1);
    expect(onError).toHaveBeenCalledWith(down);
  });

  it('without handlers, resolves to the raw result and rejects with the raw error', async () => {
    await expect(evalScript(fakeClient(['ok']).client, def, keys, [])).resolves.toBe('ok');
    const err = new Error('WRONGTYPE');
    await expect(evalScript(fakeClient([err]).client, def, keys, [])).rejects.toBe(err);
  });
});
