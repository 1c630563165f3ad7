import { Cluster, type Redis } from 'ioredis';

/** What this module reads of an ioredis command and of the queue of commands a connection has written. */
interface SentCommand {
  isSettled: boolean;
  reject(err: Error): void;
  [DEADLINE]?: number;
}
interface Internals {
  commandQueue: { length: number; peekAt(i: number): { command: SentCommand } | undefined };
  sendCommand(command: SentCommand, stream?: unknown): unknown;
}

const DEADLINE = Symbol('redis-pay:commandDeadline');
const armed = new WeakSet<Redis>();

/**
 * The command timeout of `node` with one timer for the connection instead of one per command. ioredis's
 * `commandTimeout` arms a setTimeout for every command and clears it when the reply comes (about half a microsecond
 * of every command). Here each command is stamped with its deadline when it is sent, and one timer, running while
 * commands are in flight, rejects each command still unanswered at its deadline with ioredis's own "Command timed
 * out" error. A connection answers its commands in order, so only the oldest can be late: the timer is set for the
 * oldest unanswered command's deadline, and a late command is rejected as promptly as ioredis would. As with
 * ioredis's timeout, a late reply is dropped. The connection must be made without `commandTimeout`. Idempotent.
 */
export function commandDeadlines(node: Redis, timeoutMs: number): void {
  if (armed.has(node)) return;
  armed.add(node);
  const conn = node as unknown as Internals;
  let timer: NodeJS.Timeout | undefined;

  const check = () => {
    timer = undefined;
    const now = Date.now();
    const queue = conn.commandQueue;
    for (let i = 0; i < queue.length; i++) {
      const command = queue.peekAt(i)?.command;
      if (command === undefined || command.isSettled) continue;
      const deadline = command[DEADLINE];
      if (deadline === undefined) continue;
      if (deadline > now) {
        arm(deadline - now);
        return;
      }
      command.reject(new Error('Command timed out'));
    }
  };
  // Unref'd: a command in flight keeps its socket, and with it the process, alive anyway.
  const arm = (ms: number) => (timer = setTimeout(check, ms).unref());

  const send = conn.sendCommand;
  conn.sendCommand = function (this: Internals, command: SentCommand, stream?: unknown) {
    command[DEADLINE] = Date.now() + timeoutMs;
    if (timer === undefined) arm(timeoutMs);
    return send.call(this, command, stream);
  };
}

/** commandDeadlines for the command connection: the connection itself, or every node of a cluster as it joins. */
export function commandDeadlinesOf(conn: Redis | Cluster, timeoutMs: number): void {
  if (conn instanceof Cluster) {
    conn.on('+node', (node: Redis) => commandDeadlines(node, timeoutMs));
    conn.nodes().forEach((node) => commandDeadlines(node, timeoutMs));
  } else {
    commandDeadlines(conn, timeoutMs);
  }
}
