import { fastPathFor } from '../../../platform/http/fast-path';
import { commandFailure as failure } from '../../../../test/support/command-failure';
import { MAX_MESSAGE_EXPIRES_AT, MAX_MESSAGE_TTL_MS } from '../message.commands';
import { MessageCommandDto, WithdrawCommandDto } from './write-message.dto';

/** MessagesService checks every command, from HTTP or in process, by the body's rules (MessageCommandDto). */
describe('message commands (validateCommand with MessageCommandDto)', () => {
  const sound = { accountId: 'acc_1', bizType: 'PAYMENT_SUCCESS', outerBizId: 'o-1', title: 'Paid', content: '¥1 paid' };
  it('takes a sound command, its optional fields absent or undefined (as a mapped HTTP body has them), and the service’s own bizTypes', async () => {
    expect(await failure(MessageCommandDto, sound)).toBeUndefined();
    expect(await failure(MessageCommandDto, { ...sound, url: undefined, ttlMs: undefined, expiresAt: undefined })).toBeUndefined();
    expect(
      await failure(MessageCommandDto, { ...sound, bizType: 'CLOSE_REMINDER', expiresAt: MAX_MESSAGE_EXPIRES_AT, ttlMs: MAX_MESSAGE_TTL_MS }),
    ).toBeUndefined();
    expect(await failure(WithdrawCommandDto, { accountId: 'acc_1', bizType: 'BROADCAST', outerBizId: 'o-1' })).toBeUndefined();
  });

  it('has a fast path (every HTTP write is checked again in the service)', () => {
    expect(fastPathFor(MessageCommandDto)).toBeDefined();
  });

  it.each([
    ['accountId', { accountId: 'a b' }],
    ['accountId', { accountId: '..' }],
    ['bizType', { bizType: 'a|b' }],
    ['bizType', { bizType: 'x'.repeat(33) }],
    ['outerBizId', { outerBizId: 'has space' }],
    ['title', { title: ' ' }],
    ['content', { content: 'x'.repeat(2001) }],
    ['url', { url: 'javascript:alert(1)' }],
    ['ttlMs', { ttlMs: 0 }],
    ['ttlMs', { ttlMs: MAX_MESSAGE_TTL_MS + 1 }],
    ['expiresAt', { expiresAt: 0 }],
    ['expiresAt', { expiresAt: 1000.5 }],
    ['expiresAt', { expiresAt: Number.NaN }],
    ['expiresAt', { expiresAt: MAX_MESSAGE_EXPIRES_AT + 1 }],
    ['expiresAt', { expiresAt: '1795336200000' }],
    ['extra', { extra: 1 }],
  ])('names %s for %j', async (field, change) => {
    expect((await failure(MessageCommandDto, { ...sound, ...change }))?.field).toBe(field);
  });

  it('words an expiresAt out of range as a time, as an HTTP write of a time before 1970 is told', async () => {
    expect((await failure(MessageCommandDto, { ...sound, expiresAt: Date.parse('1969-12-31T23:59:59Z') }))?.message).toBe(
      `expiresAt must be a time from 1970-01-01T00:00:00.001Z to 9999-12-31T23:59:59.999Z (in process: epoch ms, an integer from 1 to ${MAX_MESSAGE_EXPIRES_AT})`,
    );
  });
});
