/**
 * Makes sure `redis-server`, `redis-cli` (the test harness and the managed
 * development Redis need them) and `openssl` (the TLS test makes its
 * certificates with it) are installed, installing Debian's packages when one
 * is missing. Runs before `npm test`.
 */
import { installRedis, which } from './dev/managed-redis';

if (!which('redis-server') || !which('redis-cli') || !which('openssl')) installRedis((line) => console.log(line), ['openssl']);
