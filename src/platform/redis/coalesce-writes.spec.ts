import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { Writable } from 'node:stream';
import { coalesceWrites } from './coalesce-writes';

/** A Writable that records each batch the stream hands down (one entry per _write or _writev call). */
function recorder() {
  const batches: string[][] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      batches.push([chunk.toString()]);
      cb();
    },
    writev(chunks, cb) {
      batches.push(chunks.map((c) => String(c.chunk)));
      cb();
    },
  });
  return { stream, batches };
}

const nextTurn = () => new Promise((r) => setImmediate(r));

describe('coalesceWrites', () => {
  it('hands the writes of one event-loop turn down together, in order, once the turn ends', async () => {
    const { stream, batches } = recorder();
    coalesceWrites(stream);
    stream.write('a');
    stream.write('b');
    stream.write(Buffer.from('c'));
    expect(batches).toEqual([]);
    await nextTurn();
    expect(batches).toEqual([['a', 'b', 'c']]);
  });

  it('starts a new batch in the next turn, and leaves no cork behind', async () => {
    const { stream, batches } = recorder();
    coalesceWrites(stream);
    stream.write('1');
    await nextTurn();
    stream.write('2');
    stream.write('3');
    await nextTurn();
    expect(batches).toEqual([['1'], ['2', '3']]);
    expect(stream.writableCorked).toBe(0);
  });

  it('keeps write()’s callbacks and return value', async () => {
    const { stream } = recorder();
    coalesceWrites(stream);
    const done = jest.fn();
    expect(stream.write('x', done)).toBe(true);
    expect(stream.write('y', 'utf8', done)).toBe(true);
    await nextTurn();
    await nextTurn();
    expect(done).toHaveBeenCalledTimes(2);
  });

  it('is idempotent per stream and ignores a missing one', async () => {
    const { stream, batches } = recorder();
    coalesceWrites(stream);
    coalesceWrites(stream);
    coalesceWrites(undefined);
    stream.write('a');
    await nextTurn();
    expect(batches).toEqual([['a']]);
    expect(stream.writableCorked).toBe(0);
  });

  describe('on a TCP socket', () => {
    let server: Server;
    let received: Buffer[];
    let peer: Socket;

    beforeEach(async () => {
      received = [];
      server = createServer((s) => s.on('data', (d: Buffer) => received.push(d)));
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
    });

    afterEach(async () => {
      peer?.destroy();
      server.close();
      await once(server, 'close');
    });

    it('sends everything written in one turn, byte for byte and in order', async () => {
      const { port } = server.address() as AddressInfo;
      peer = connect(port, '127.0.0.1');
      await once(peer, 'connect');
      coalesceWrites(peer);
      const parts = Array.from({ length: 50 }, (_, i) => `*1\r\n$4\r\nPING\r\n#${i};`);
      for (const p of parts) peer.write(p);
      const want = parts.join('');
      const deadline = Date.now() + 5000;
      while (Buffer.concat(received).length < want.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      expect(Buffer.concat(received).toString()).toBe(want);
    });
  });
});
