import { connect, type AddressInfo } from 'node:net';
import { useAppOnOwnRedis, userToken } from '../support/test-app';

/**
 * A body over the limit is answered 413, and every client reads that 413: the service reads and discards the rest
 * of the body (within a bound) before it closes the connection, so a client still sending is not reset.
 */
const ctx = useAppOnOwnRedis({ RATE_LIMIT_ENABLED: 'false' });
const TWO_MB = 2 * 1024 * 1024;
const auth = () => `Bearer ${userToken('acc_big_body')}`;
const port = () => (ctx.t.server.address() as AddressInfo).port;

/**
 * Sends a request with a `size`-byte body as a client streaming it does: 64 KiB a millisecond, still sending after
 * the answer may have gone out. Resolves with what it read, and the socket error if any.
 */
function rawPost(size: number, contentType = 'application/json'): Promise<{ reply: string; error?: string }> {
  return new Promise((resolve) => {
    const socket = connect(port(), '127.0.0.1');
    let reply = '';
    let error: string | undefined;
    socket.setEncoding('latin1');
    socket.on('data', (c: string) => (reply += c));
    socket.on('error', (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
    socket.on('close', () => resolve({ reply, error }));
    const body = Buffer.alloc(size, 0x20);
    body.write('{"label":"', 0);
    body.write('"}', size - 2);
    socket.write(`POST /diagnostics/touch HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth()}\r\nContent-Type: ${contentType}\r\nContent-Length: ${size}\r\n\r\n`);
    let offset = 0;
    const pump = setInterval(() => {
      if (offset >= size || socket.destroyed) return clearInterval(pump);
      socket.write(body.subarray(offset, (offset += 64 * 1024)));
    }, 1);
  });
}

const statusLine = (r: { reply: string }) => r.reply.split('\r\n')[0] || 'nothing read';

describe('a body over the limit', () => {
  it('is answered 413 on a raw socket, every time, and never reset (200 tries)', async () => {
    const outcomes: Record<string, number> = {};
    for (let batch = 0; batch < 20; batch++) {
      const results = await Promise.all(Array.from({ length: 10 }, () => rawPost(TWO_MB)));
      for (const r of results) {
        const key = r.error ? `${statusLine(r)} + ${r.error}` : statusLine(r);
        outcomes[key] = (outcomes[key] ?? 0) + 1;
      }
    }
    expect(outcomes).toEqual({ 'HTTP/1.1 413 Payload Too Large': 200 });
  }, 120_000);

  it('a 415 answered before a large body is read reaches the client too (50 tries)', async () => {
    const outcomes: Record<string, number> = {};
    for (let batch = 0; batch < 5; batch++) {
      for (const r of await Promise.all(Array.from({ length: 10 }, () => rawPost(TWO_MB, 'text/plain')))) {
        const key = r.error ? `${statusLine(r)} + ${r.error}` : statusLine(r);
        outcomes[key] = (outcomes[key] ?? 0) + 1;
      }
    }
    expect(outcomes).toEqual({ 'HTTP/1.1 415 Unsupported Media Type': 50 });
  }, 120_000);

  it('is answered 413 to fetch, every time (200 tries, no ECONNRESET), in the standard error shape', async () => {
    const url = `http://127.0.0.1:${port()}/diagnostics/touch`;
    const body = JSON.stringify({ label: 'x'.repeat(TWO_MB) });
    const outcomes: Record<string, number> = {};
    for (let batch = 0; batch < 20; batch++) {
      const results = await Promise.all(
        Array.from({ length: 10 }, async () => {
          try {
            const res = await fetch(url, { method: 'POST', headers: { authorization: auth(), 'content-type': 'application/json' }, body });
            const json = (await res.json()) as { error?: string };
            return `${res.status} ${json.error}`;
          } catch (e) {
            const cause = (e as { cause?: { code?: string } }).cause;
            return `failed: ${cause?.code ?? String(e)}`;
          }
        }),
      );
      for (const r of results) outcomes[r] = (outcomes[r] ?? 0) + 1;
    }
    expect(outcomes).toEqual({ '413 PAYLOAD_TOO_LARGE': 200 });
  }, 120_000);

  it('still serves the next request after a 413 (the service is not held up by the drain)', async () => {
    const big = await rawPost(TWO_MB);
    expect(statusLine(big)).toBe('HTTP/1.1 413 Payload Too Large');
    const res = await fetch(`http://127.0.0.1:${port()}/health/live`);
    expect(res.status).toBeLessThan(500);
  });
});
