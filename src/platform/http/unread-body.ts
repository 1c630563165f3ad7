import type { IncomingMessage } from 'node:http';

/** Most bytes of an unread request body read and discarded before an error answer (above the largest route limit, 8 MiB). */
export const MAX_DRAIN_BYTES = 16 * 1024 * 1024;
/** Longest wait for the rest of an unread request body before an error answer goes out anyway. */
export const MAX_DRAIN_MS = 5_000;

/**
 * Reads and discards what is left of a request body, until it ends, `maxBytes` more arrive, `maxMs` pass or the
 * connection closes: whichever comes first. Resolves then; never rejects.
 *
 * An error answered before its body was read (a 413 on its Content-Length or mid-body, a 415) closes the connection.
 * Closing a socket with bytes still arriving makes the kernel answer them with a reset, and a client still sending
 * then saw ECONNRESET instead of the answer (about one in thirty). Read to its end first, the body leaves nothing
 * to reset, and the client reads the answer; past the bounds, a client sending without end is cut as before.
 */
export function drainUnreadBody(raw: IncomingMessage, maxBytes = MAX_DRAIN_BYTES, maxMs = MAX_DRAIN_MS): Promise<void> {
  // readableEnded: a body read to its end by a parser that reports `complete` late (some routes' bodies end so).
  if (raw.complete || raw.readableEnded || raw.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    let read = 0;
    const finish = () => {
      clearTimeout(timer);
      raw.off('data', onData);
      raw.off('end', finish);
      raw.off('error', finish);
      raw.off('close', finish);
      resolve();
    };
    const onData = (chunk: Buffer | string) => {
      read += chunk.length;
      if (read > maxBytes) finish();
    };
    const timer = setTimeout(finish, maxMs);
    raw.on('data', onData);
    raw.once('end', finish);
    raw.once('error', finish);
    raw.once('close', finish);
    raw.resume();
  });
}
