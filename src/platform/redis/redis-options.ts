import { readFileSync } from 'node:fs';
import type { ClusterOptions, RedisOptions } from 'ioredis';
import { RedisConfig } from '../config/app-config';

/** Reconnect forever with capped backoff; callers never wait on it because commands time out. */
const retryStrategy = (times: number) => Math.min(50 * 2 ** Math.min(times, 6), 2000);

/** ioredis options shared by every connection to a data node. */
export function nodeOptions(cfg: RedisConfig): RedisOptions {
  const tls = cfg.tls ? { ca: cfg.tlsCaFile ? readFileSync(cfg.tlsCaFile) : undefined, rejectUnauthorized: cfg.tlsRejectUnauthorized } : undefined;
  return {
    username: cfg.username,
    password: cfg.password,
    tls,
    lazyConnect: true,
    connectTimeout: cfg.connectTimeoutMs,
    // Every command settles within the timeout, so an unreachable Redis becomes a prompt 503, never a hang.
    commandTimeout: cfg.commandTimeoutMs,
    maxRetriesPerRequest: 1,
    // No command is ever queued while disconnected or re-sent after a connection drops: a caller that got a
    // 503 must never find its command executed later behind its back (ioredis would replay both by default).
    // Long-lived pub/sub and blocking connections override the offline queue (see RedisService).
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    retryStrategy,
    // Off: with auto-pipelining, 50 concurrent calls go out as one write per tick and Node and Redis take turns
    // on whole batches instead of overlapping (bench delay-queue: it halved schedule() throughput at 50 in flight).
    // Without it every command is a syscall of its own, on both sides, so RedisService coalesces the command
    // connection's writes per event-loop turn instead (coalesce-writes.ts): one writev, no wait for a batch's replies.
    enableAutoPipelining: false,
  };
}

/** Options for a standalone (URL) or Sentinel connection. */
export function standaloneOrSentinelOptions(cfg: RedisConfig): RedisOptions {
  const base = nodeOptions(cfg);
  const t = cfg.topology;
  if (t.mode === 'sentinel') {
    return {
      ...base,
      sentinels: t.sentinels,
      name: t.masterName,
      sentinelPassword: t.sentinelPassword,
      enableTLSForSentinelMode: cfg.tls,
      sentinelRetryStrategy: retryStrategy,
      // Reconnect as soon as a Sentinel publishes +switch-master. Without it, after a failover that leaves the
      // old master running (SENTINEL FAILOVER, a partition), writes keep going to the old master until Sentinel
      // demotes it (~10 s), and its resync from the new master discards every one of them.
      failoverDetector: true,
      // Follow a failover: reconnect to the new master when the old one turns into a replica.
      reconnectOnError: (err) => /READONLY/.test(err.message),
    };
  }
  return base;
}

export function clusterOptions(cfg: RedisConfig): ClusterOptions {
  const { enableAutoPipelining, ...redisOptions } = nodeOptions(cfg);
  return {
    redisOptions,
    lazyConnect: true,
    enableAutoPipelining,
    enableOfflineQueue: false,
    enableReadyCheck: true,
    scaleReads: 'master',
    maxRedirections: 16,
    // Never re-send on "Connection is closed.": the command may already have run (a script would run twice).
    // MOVED/ASK/TRYAGAIN/CLUSTERDOWN are still retried: Redis refused those without running them.
    retryDelayOnFailover: 0,
    retryDelayOnClusterDown: 100,
    clusterRetryStrategy: retryStrategy,
    slotsRefreshTimeout: cfg.connectTimeoutMs,
  };
}
