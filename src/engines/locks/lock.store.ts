import { Injectable } from '@nestjs/common';
import { KeyBuilder } from '../../platform/redis/key-builder';
import { isRedisUnavailable } from '../../platform/redis/redis-unavailable.error';
import { ScriptConflictError, ScriptNotFoundError } from '../../platform/scripts/script.errors';
import { ScriptRegistry } from '../../platform/scripts/script-registry.service';
import { LockLostError, LockUnavailableError, LockUpgradeRefusedError } from './lock.errors';
import type { LockMode, LockState } from './lock.types';
import { type LockKeys, lockKeys } from './lock.keys';

/** The fencing counter outlives its lock by this long; after that, tokens still never go below the Redis clock in µs. */
const FENCE_KEEP_MS = 60 * 60_000;

/** One try of `acquire`. */
export interface AcquireCommand {
  owner: string;
  mode: LockMode;
  leaseMs: number;
  /** For a writer that does not get the lock: how long to keep new readers out while it waits, ms (0: it does not wait). */
  intentMs: number;
  /** The caller waits if the lock is taken, so the lock is marked for its release to be published. */
  waits: boolean;
  /** Other callers in this process wait for it, so the mark stays even if this one gets it. */
  othersWait: boolean;
}

/** What one acquire try found: the hold, or how long until the lock may be free. */
export type AcquireResult = { held: true; fencingToken: number; expiresAt: number; holdCount: number } | { held: false; freeInMs: number };

/** Held: [1, fencing token (decimal string: past 2^31, exact), lease end, hold count]; contended: [0, ms until it may be free]. */
type AcquireReply = [1, string, number, number] | [0, number];

/**
 * The lock engine's Redis side: the keys of a lock, one typed wrapper per
 * script in `lua/engines/locks/`, and the decoding of their replies. A Redis outage
 * becomes LockUnavailableError, an owner that holds nothing LockLostError.
 * Behaviour (waiting, renewing, reentrancy) is LockService's.
 */
@Injectable()
export class LockStore {
  constructor(
    private readonly scripts: ScriptRegistry,
    private readonly keyBuilder: KeyBuilder,
  ) {}

  /** The keys of lock `name`, which must be a valid lock name (LOCK_NAME_RE). */
  keys(name: string): LockKeys {
    return lockKeys(this.keyBuilder, name);
  }

  /** One try at a hold; a reader asking to become the writer is refused with a 409. */
  acquire(name: string, keys: LockKeys, cmd: AcquireCommand): Promise<AcquireResult> {
    const args = [
      cmd.owner,
      cmd.mode === 'write' ? 'w' : 'r',
      cmd.leaseMs,
      Math.max(0, cmd.intentMs),
      FENCE_KEEP_MS,
      cmd.waits ? '1' : '0',
      cmd.othersWait ? '1' : '0',
    ];
    return this.run<AcquireReply, AcquireResult>(name, 'locks/acquire', [keys.hash, keys.fence], args, cmd.owner, (r) =>
      r[0] === 1 ? { held: true, fencingToken: Number(r[1]), expiresAt: r[2], holdCount: r[3] } : { held: false, freeInMs: r[1] },
    );
  }

  /** Extends `owner`'s lease to at least now + leaseMs; resolves to the lease end (Redis clock, epoch ms). */
  renew(name: string, keys: LockKeys, owner: string, leaseMs: number): Promise<number> {
    return this.run<number, number>(name, 'locks/renew', [keys.hash], [owner, leaseMs], owner, Number);
  }

  /** Gives back one hold of `owner`; resolves to its remaining hold count (0: the lock is free of it). */
  release(name: string, keys: LockKeys, owner: string): Promise<number> {
    return this.run<number, number>(name, 'locks/release', [keys.hash], [owner, keys.channel], owner, Number);
  }

  /** The lock as it is now, or null when nobody holds it. */
  inspect(name: string, keys: LockKeys): Promise<LockState | null> {
    return this.run<Array<string | number | null>, LockState | null>(name, 'locks/inspect', [keys.hash, keys.fence], [], undefined, (r) => {
      if (!r[0]) return null;
      const holders: LockState['holders'] = [];
      for (let i = 3; i + 2 < r.length; i += 3) holders.push({ owner: String(r[i]), count: Number(r[i + 1]), expiresAt: Number(r[i + 2]) });
      return { name, mode: r[0] === 'r' ? 'read' : 'write', holders, ttlMs: Number(r[1]), fencingToken: Number(r[2]) };
    });
  }

  /** Runs a lock script and decodes its reply; maps Redis outages to LockUnavailableError and result codes to lock errors. */
  private run<R, T>(
    name: string,
    script: string,
    keys: string[],
    args: Array<string | number>,
    owner: string | undefined,
    decode: (reply: R) => T,
  ): Promise<T> {
    // One chained step for decoding and errors, not an async layer (this runs on every acquire and release).
    return this.scripts.run<R>(script, keys, args).then(decode, (err: unknown) => {
      if (isRedisUnavailable(err)) throw new LockUnavailableError(name, err);
      if (err instanceof ScriptNotFoundError) throw new LockLostError(name, owner ?? '');
      if (err instanceof ScriptConflictError) {
        throw new LockUpgradeRefusedError(name);
      }
      throw err;
    });
  }
}
