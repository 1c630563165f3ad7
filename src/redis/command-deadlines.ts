import { Cluster, type Redis } from 'ioredis';

/** What the watch needs of an ioredis Command: whether it settled, how to fail it, and when it must have. */
interface Watched {
  isSettled: boolean;
  reject(err: Error): void;
  /** Epoch ms by which the command must have settled (set on its first send; a resend keeps it). */
  deadline?: number;
}

type SendCommand = (command: Watched, ...rest: unknown[]) => unknown;

const watched = new WeakSet<object>();

/**
 * Fails every command sent on `node` that has not settled `timeoutMs` after it was first sent with ioredis's own
 * error ("Command timed out", which RedisService maps to a 503), as ioredis's `commandTimeout` option does, but
 * with one timer per connection rather than a timer set and cleared per command (about half a microsecond of
 * every command under load). Commands are watched in the order they are sent: one connection answers in that
 * order, so the oldest unsettled command is the first that can be late, and the timer wakes for it alone. A
 * command is failed between `timeoutMs` and `timeoutMs` + a tenth of it after it was sent.
 *
 * The connection must be made without `commandTimeout` (it would time every command twice). Idempotent per node.
 */
export function watchCommandDeadlines(node: Redis, timeoutMs: number): void {
  if (watched.has(node)) return;
  watched.add(node);
  const resolution = Math.max(1, Math.ceil(timeoutMs / 10));
  let queue: Watched[] = [];
  let head = 0;
  let timer: NodeJS.Timeout | undefined;

  const sweep = () => {
    timer = undefined;
    const now = Date.now();
    while (head < queue.length) {
      const c = queue[head];
      if (!c.isSettled) {
        if (c.deadline! > now) break;
        c.reject(new Error('Command timed out'));
      }
      head++;
    }
    if (head === queue.length) {
      queue = [];
      head = 0;
      return;
    }
    // Drop what was swept once it is most of the queue (a steady load keeps a few unsettled commands at its head).
    if (head > 1024 && head * 2 > queue.length) {
      queue = queue.slice(head);
      head = 0;
    }
    arm(queue[head].deadline! - now);
  };
  const arm = (inMs: number) => {
    timer = setTimeout(sweep, Math.max(resolution, inMs));
    timer.unref();
  };

  const send = node.sendCommand as unknown as SendCommand;
  (node as unknown as { sendCommand: SendCommand }).sendCommand = function (this: Redis, command: Watched, ...rest: unknown[]) {
    if (command.deadline === undefined) {
      command.deadline = Date.now() + timeoutMs;
      queue.push(command);
      if (timer === undefined) arm(timeoutMs);
    }
    return send.call(this, command, ...rest);
  };
}

/** Watches the command deadlines (see watchCommandDeadlines) of a connection: its node, or each node of a cluster as it joins. */
export function watchConnectionDeadlines(conn: Redis | Cluster, timeoutMs: number): void {
  if (conn instanceof Cluster) {
    conn.on('+node', (node: Redis) => watchCommandDeadlines(node, timeoutMs));
    conn.nodes().forEach((node) => watchCommandDeadlines(node, timeoutMs));
  } else {
    watchCommandDeadlines(conn, timeoutMs);
  }
}
