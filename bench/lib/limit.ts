export { forEachLimit } from '../../src/common/for-each-limit';
