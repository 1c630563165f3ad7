/**
 * Makes sure `redis-server` and `redis-cli` are installed (the test harness
 * and the managed development Redis need them), installing Debian's packages
 * when they are missing. Runs before `npm test`.
 */
import { installRedis, which } from '../src/redis/managed-redis';

if (!which('redis-server') || !which('redis-cli')) installRedis((line) => console.log(line));
