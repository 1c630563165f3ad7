export { forEachLimit } from '../../src/platform/core/for-each-limit';
