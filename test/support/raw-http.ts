import { connect, type AddressInfo } from 'node:net';
import type { TestApp } from './test-app';

/**
 * Sends `bytes` as they are on a new connection to the app and reads until the server closes it: for requests
 * SuperTest cannot send (repeated headers, no Content-Length, malformed HTTP). A reset after an answer counts as
 * the close.
 */
export function rawExchange(t: TestApp, bytes: string): Promise<string> {
  const { port } = t.server.address() as AddressInfo;
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let got = '';
    socket.setEncoding('utf8');
    socket.on('data', (c: string) => (got += c));
    socket.on('close', () => resolve(got));
    socket.on('error', (e: NodeJS.ErrnoException) => (e.code === 'ECONNRESET' && got ? resolve(got) : reject(e)));
    socket.write(bytes);
  });
}
