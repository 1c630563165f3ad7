import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';

/** What Node's HTTP parser refuses before any request exists, by its error code; anything else is a 400. */
const CLIENT_ERRORS: Record<string, { status: number; error: string; message: string }> = {
  HPE_HEADER_OVERFLOW: { status: 431, error: 'HEADERS_TOO_LARGE', message: 'The request headers are too large' },
  ERR_HTTP_REQUEST_TIMEOUT: { status: 408, error: 'REQUEST_TIMEOUT', message: 'The request did not arrive in time' },
};
const MALFORMED = { status: 400, error: 'BAD_REQUEST', message: 'The request is not valid HTTP' };

/**
 * Fastify `clientErrorHandler`: answers a request the HTTP parser refused (headers too large, a
 * malformed request line or header, a timeout) in the service's one error body, with a request id in
 * the body and the header, and `Connection: close`, since the connection ends here. (Fastify's own
 * answer had another shape, no request id, and no `Connection: close`, so a keep-alive client sent its
 * next request on the closed connection.)
 */
export function clientErrorHandler(requestIdHeader: string) {
  return (err: Error & { code?: string }, socket: Socket): void => {
    // A reset connection has nobody to answer.
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    const { status, error, message } = CLIENT_ERRORS[err.code ?? ''] ?? MALFORMED;
    const requestId = randomUUID();
    const body = JSON.stringify({ statusCode: status, error, message, requestId });
    if (socket.writable) {
      socket.write(
        `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
          `${requestIdHeader}: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
      );
    }
    socket.destroy();
  };
}
