import { plainToInstance } from 'class-transformer';
import { validate } from 'class-validator';
import { listedMessage } from '../../../platform/http/api.error';
import { fastPathFor } from '../../../platform/http/fast-path';
import { NOT_UNICODE, notUnicodeMessage } from '../../../platform/http/json-body';
import { flattenValidationErrors } from '../../../platform/http/validation';
import type { InvalidBatchItem, WriteMessageCommand } from '../message.commands';
import { WriteMessageDto } from './write-message.dto';

/**
 * The service's command for a validated write body (only the fields the command knows); `expiresAt`
 * becomes epoch ms (NaN for a date Date cannot read, which the service refuses naming the field).
 */
export function toWriteCommand(dto: WriteMessageDto): WriteMessageCommand {
  const { accountId, bizType, outerBizId, title, content, url, logoUrl, needPush, createdAt, ttlMs } = dto;
  const expiresAt = dto.expiresAt === undefined ? undefined : Date.parse(dto.expiresAt);
  return { accountId, bizType, outerBizId, title, content, url, logoUrl, needPush, createdAt, ttlMs, expiresAt };
}

/**
 * One item of POST /messages/batch, checked by the rules of a POST /messages body: its command, or
 * why it is refused (each item fails alone). The fast path takes what it can prove valid;
 * class-validator decides the rest and names what is wrong.
 */
export async function batchItemCommand(item: unknown): Promise<WriteMessageCommand | InvalidBatchItem> {
  // Text that is not Unicode (a lone surrogate) fails its item alone; the body parser leaves it to this check.
  const notUnicode = (item as { [NOT_UNICODE]?: string } | null)?.[NOT_UNICODE];
  if (notUnicode !== undefined) return { invalid: notUnicodeMessage(notUnicode) };
  if (fastPathFor(WriteMessageDto)?.(item)) return toWriteCommand(item as WriteMessageDto);
  if (typeof item !== 'object' || item === null || Array.isArray(item)) return { invalid: 'each message must be an object' };
  const errors = await validate(plainToInstance(WriteMessageDto, item), { whitelist: true, forbidNonWhitelisted: true });
  if (errors.length > 0)
    return {
      invalid: listedMessage(flattenValidationErrors(errors).flatMap((e) => e.errors)),
    };
  return toWriteCommand(item as WriteMessageDto);
}
