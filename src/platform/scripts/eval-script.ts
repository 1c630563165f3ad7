import type { Cluster, Redis } from 'ioredis';
import type { ScriptDefinition } from './script-loader';

export type ScriptArg = string | number | Buffer;

const same = <T>(r: unknown) => r as T;
const rethrow = (err: unknown): never => {
  throw err;
};

/**
 * EVALSHA, and EVAL when the node answers NOSCRIPT (EVAL runs it on the same node, routed by the
 * same keys, and caches it there again). `onResult` and `onError` see the outcome of whichever ran.
 * Plain commands and one `then` rather than ioredis's defineCommand, whose wrapper adds promises
 * and closures to every call (docs/adr/0001-evalsha-over-definecommand.md).
 */
export function evalScript<T = unknown>(
  client: Redis | Cluster,
  def: Pick<ScriptDefinition, 'sha' | 'source' | 'numberOfKeys'>,
  keys: readonly string[],
  args: readonly ScriptArg[],
  onResult: (result: unknown) => T = same,
  onError: (err: unknown) => T = rethrow,
): Promise<T> {
  return client.evalsha(def.sha, def.numberOfKeys, ...keys, ...args).then(onResult, (err: unknown) => {
    if (!(err instanceof Error && err.message.startsWith('NOSCRIPT'))) return onError(err);
    return client.eval(def.source, def.numberOfKeys, ...keys, ...args).then(onResult, onError);
  });
}
