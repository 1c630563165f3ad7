import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/**
 * Node's `server.close()` (which closing Fastify calls) waits for every open connection, and ends only the keep-alive
 * ones that sit between two requests. A connection that has not sent a request yet (pre-opened by a client or a load
 * balancer, opened while the process was stopped, or one whose request headers never end) counts as busy, and
 * `close()` also stops the timer that would have timed its headers out: one such connection held the shutdown until
 * `SHUTDOWN_GRACE_MS` ran out (exit 1, background workers never stopped, queue items never handed back).
 *
 * `closeUnused()` ends every connection with no request in progress; a connection whose request is in progress
 * keeps it, and closes after its answer (`Connection: close` while draining).
 */
export function trackConnections(server: Server): { closeUnused(): void } {
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  return {
    closeUnused() {
      // `_httpMessage`: the response the socket is serving, set from the request's headers to the response's end (what
      // Node's own closeIdleConnections checks).
      for (const socket of sockets) if (!(socket as Socket & { _httpMessage?: unknown })._httpMessage) socket.destroy();
    },
  };
}
