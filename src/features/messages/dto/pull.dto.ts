import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { QueryInt } from '../../../platform/http/validation';
import { IsInt, IsString, Matches, Max, MaxLength, Min } from 'class-validator';
import { IsOptionalField } from '../../../platform/http/optional-field';
import { MSG_ID_RE } from '../message.keys';

export class PullQueryDto {
  /** The last msgId the app has; omit for the newest page */
  @ApiPropertyOptional({ example: '1795302000000000' })
  @IsOptionalField()
  @IsString()
  @MaxLength(17)
  @Matches(MSG_ID_RE, { message: 'after must be a msgId (digits)' })
  after?: string;

  @ApiPropertyOptional({ type: 'integer', default: 20 })
  @IsOptionalField()
  @QueryInt()
  @IsInt()
  @Min(1)
  @Max(100)
  limit?: number;
}

export class MsgIdParamDto {
  /** A `msgId` of your message list (`GET /messages`) */
  @ApiProperty({ example: '1795302000000000' })
  @IsString()
  @MaxLength(17)
  @Matches(MSG_ID_RE, { message: 'msgId must be digits' })
  msgId!: string;
}

export class MessageDto {
  @ApiProperty({ description: 'Server sequence; pass the newest as `after` on the next pull', example: '1795302000000000' }) msgId!: string;
  @ApiProperty({ example: 'PAYMENT_SUCCESS' }) bizType!: string;
  @ApiProperty({ example: 'order-20261122-0001' }) outerBizId!: string;
  @ApiProperty({ example: 'Payment successful' }) title!: string;
  @ApiProperty({ example: '¥128.00 paid to Coffee Corner' }) content!: string;
  @ApiPropertyOptional({ example: 'redispay://orders/order-20261122-0001' }) url?: string;
  @ApiPropertyOptional({ example: 'https://static.example.com/logos/pay.png' }) logoUrl?: string;
  @ApiProperty({ example: false }) needPush!: boolean;
  @ApiProperty({ description: 'When the business event happened (as the writer said)', example: '2026-11-22T08:30:00.000Z' }) createdAt!: string;
  @ApiProperty({ description: 'When the service stored it (Redis clock)', example: '2026-11-22T08:30:00.120Z' }) storedAt!: string;
  @ApiProperty({ example: false }) read!: boolean;
  @ApiPropertyOptional({ description: 'Set on broadcasts', example: '1795302000000000' }) broadcastId?: string;
}

export class PullResultDto {
  @ApiProperty({ type: [MessageDto], description: 'Oldest first' }) messages!: MessageDto[];
  @ApiProperty({ description: 'With `after`: more newer messages wait (pull again with after=latestId). Without: older messages exist.', example: false })
  hasMore!: boolean;
  @ApiProperty({
    description: 'The newest msgId returned, else the cursor sent; null when the inbox is empty',
    nullable: true,
    type: String,
    example: '1795302000000000',
  })
  latestId!: string | null;
  @ApiProperty({ example: 3 }) unread!: number;
}

export class UnreadCountDto {
  @ApiProperty({ example: 3 }) unread!: number;
}

export class MarkReadResultDto {
  @ApiProperty({ description: 'False when it was already read', example: true }) changed!: boolean;
  @ApiProperty({ example: 2 }) unread!: number;
}

export class MarkAllReadResultDto {
  @ApiProperty({ description: 'How many were unread', example: 3 }) marked!: number;
  @ApiProperty({ example: 0 }) unread!: number;
}
