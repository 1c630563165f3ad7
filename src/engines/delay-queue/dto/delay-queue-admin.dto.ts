import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { QueryInt } from '../../../platform/http/validation';
import { IsInt, IsString, Matches, Max, MaxLength, Min } from 'class-validator';
import { IsOptionalField } from '../../../platform/http/optional-field';
import { ITEM_ID_RE, QUEUE_NAME_RE } from '../delay-queue.keys';

export class QueueParamDto {
  /** A queue's name, as `GET /admin/delay-queues` lists them */
  @ApiProperty({ example: 'close-reminder' })
  @IsString()
  @MaxLength(64)
  @Matches(QUEUE_NAME_RE, { message: 'queue must be 1-64 characters of A-Z a-z 0-9 . _ : - starting with a letter or digit' })
  queue!: string;
}

export class ItemParamDto extends QueueParamDto {
  /** The item's id: the one it was scheduled with (the dead-letter page lists the dead ones) */
  @ApiProperty({ example: 'order-1001' })
  @IsString()
  @MaxLength(200)
  @Matches(ITEM_ID_RE, { message: 'id must be 1-200 printable ASCII characters without spaces' })
  id!: string;
}

export class DeadPageQueryDto {
  @ApiPropertyOptional({ type: 'integer', default: 0 })
  @IsOptionalField()
  @QueryInt()
  @IsInt()
  @Min(0)
  @Max(1_000_000)
  offset?: number;

  @ApiPropertyOptional({ type: 'integer', default: 20 })
  @IsOptionalField()
  @QueryInt()
  @IsInt()
  @Min(1)
  @Max(100)
  limit?: number;
}

export class QueueStatsDto {
  @ApiProperty({ example: 'close-reminder' }) queue!: string;
  @ApiProperty({ description: 'Items waiting for their due time', example: 1200 }) pending!: number;
  @ApiProperty({ description: 'Items due, not yet claimed by a worker', example: 0 }) ready!: number;
  @ApiProperty({ description: 'Items held by a handler', example: 3 }) inFlight!: number;
  @ApiProperty({ description: 'Dead letters', example: 1 }) dead!: number;
  @ApiProperty({ description: 'How long ago the oldest unclaimed due item came due (ms); 0 when none', example: 0 }) oldestOverdueMs!: number;
  @ApiProperty({ description: 'Due time of the earliest pending item (epoch ms)', nullable: true, type: Number, example: 1795302000000 })
  nextDueAt!: number | null;
}

export class QueueListDto {
  @ApiProperty({ type: [QueueStatsDto] }) queues!: QueueStatsDto[];
}

export class DeadLetterDto {
  @ApiProperty({ example: 'order-1001' }) id!: string;
  @ApiProperty({ description: 'The payload as scheduled (any JSON)', example: { orderId: 'order-1001' } }) payload!: unknown;
  @ApiProperty({ description: 'Deliveries made', example: 5 }) attempts!: number;
  @ApiProperty({ example: 'Error: upstream timed out' }) lastError!: string;
  @ApiProperty({ description: 'When it was dead-lettered (epoch ms)', example: 1795302000000 }) diedAt!: number;
}

export class DeadLetterPageDto {
  @ApiProperty({ type: [DeadLetterDto] }) items!: DeadLetterDto[];
  @ApiProperty({ example: 1 }) total!: number;
  @ApiProperty({ example: 0 }) offset!: number;
  @ApiProperty({ example: 20 }) limit!: number;
}

export class RetryResultDto {
  @ApiProperty({ description: 'New due time (epoch ms, Redis clock): now', example: 1795302000000 }) dueAt!: number;
}

export class CancelResultDto {
  @ApiProperty({ description: 'True when no handler had started on the item', example: true }) wasPending!: boolean;
  @ApiProperty({ enum: ['pending', 'ready', 'in-flight', 'dead', 'absent'], example: 'pending' }) state!: string;
  @ApiProperty({ description: 'Deliveries the item had before the cancel; 0 = no handler ever ran on it', example: 0 }) attempts!: number;
}
