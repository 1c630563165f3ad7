import { Cluster, type Redis } from 'ioredis';
import type { Writable } from 'node:stream';

const coalesced = new WeakSet<Writable>();

/**
 * Makes the writes to `socket` within one turn of the event loop reach the kernel together: the
 * first write of a turn corks the socket and a setImmediate uncorks it, so Node sends everything
 * written in between with one writev. Each write stays whole and in order; it only leaves a little
 * later in the same turn (after the I/O callbacks of that turn, where auto-pipelining would send it too).
 *
 * Why: ioredis writes every command to its socket at once, one syscall per command, and Redis then
 * reads, runs and answers them one by one (one read, one write and one epoll round each), which
 * multiplied Redis CPU per request under HTTP load (figures: docs/benchmarks.md, http-floor).
 * Auto-pipelining batches too, but lets only one batch per connection be in flight, so under a steady
 * stream of calls Node and Redis take turns on whole batches instead of overlapping (it halved
 * delay-queue schedule() throughput at 50 in flight); corking has no such wait, and a lone call's
 * round trip is unchanged.
 * Idempotent per socket.
 */
export function coalesceWrites(socket: Writable | undefined): void {
  if (!socket || coalesced.has(socket)) return;
  coalesced.add(socket);
  let corked = false;
  const flush = () => {
    corked = false;
    socket.uncork();
  };
  const write = socket.write as (...args: unknown[]) => boolean;
  socket.write = function (this: Writable, ...args: unknown[]): boolean {
    if (!corked) {
      corked = true;
      socket.cork();
      setImmediate(flush);
    }
    return write.apply(this, args);
  } as Writable['write'];
}

/**
 * Coalesces the writes of a command connection (see coalesceWrites): of its socket, or of every node's
 * socket for a cluster, from each (re)connect on: ioredis opens a new socket on every reconnect, and a
 * cluster a new connection per node it discovers.
 */
export function coalesceCommandWrites(conn: Redis | Cluster): void {
  const hook = (node: Redis) => {
    node.on('connect', () => coalesceWrites(node.stream));
    if (node.stream) coalesceWrites(node.stream);
  };
  if (conn instanceof Cluster) {
    conn.on('+node', hook);
    conn.nodes().forEach(hook);
  } else {
    hook(conn);
  }
}
