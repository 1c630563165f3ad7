import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TlsFiles {
  dir: string;
  caCert: string;
  cert: string;
  key: string;
}

/** A throwaway CA and a server certificate for 127.0.0.1, made with openssl. */
export function makeTlsFiles(): TlsFiles {
  const dir = mkdtempSync(join(tmpdir(), 'rp-tls-'));
  const f = (n: string) => join(dir, n);
  const ssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'ignore' });
  ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', f('ca.key'), '-out', f('ca.crt'), '-days', '1', '-subj', '/CN=redis-pay test CA');
  ssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', f('redis.key'), '-out', f('redis.csr'), '-subj', '/CN=127.0.0.1');
  writeFileSync(f('ext.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  ssl(
    'x509',
    '-req',
    '-in',
    f('redis.csr'),
    '-CA',
    f('ca.crt'),
    '-CAkey',
    f('ca.key'),
    '-CAcreateserial',
    '-out',
    f('redis.crt'),
    '-days',
    '1',
    '-extfile',
    f('ext.cnf'),
  );
  return { dir, caCert: f('ca.crt'), cert: f('redis.crt'), key: f('redis.key') };
}
