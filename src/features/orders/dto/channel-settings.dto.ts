import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsInt, Max, Min } from 'class-validator';
import { IsOptionalField } from '../../../platform/http/optional-field';
import { CHANNEL_OUTCOMES, type ChannelOutcome } from '../channels/payment-channel';
import { PAYMENT_METHODS, type PaymentMethod } from '../order.types';

const outcomeRule = (field: string) => IsIn(CHANNEL_OUTCOMES, { message: `${field} must be one of ${CHANNEL_OUTCOMES.join(', ')}` });

export class ChannelSettingsDto {
  /** Latency of every call, ms */
  @ApiPropertyOptional({ example: 20 })
  @IsOptionalField()
  @IsInt()
  @Min(0)
  @Max(60_000)
  latencyMs?: number;

  /** Outcome of pay calls */
  @ApiPropertyOptional({ enum: CHANNEL_OUTCOMES, example: 'unknown' })
  @IsOptionalField()
  @outcomeRule('pay')
  pay?: ChannelOutcome;

  /** Outcome of queries after an unknown pay */
  @ApiPropertyOptional({ enum: CHANNEL_OUTCOMES, example: 'success' })
  @IsOptionalField()
  @outcomeRule('query')
  query?: ChannelOutcome;

  /** Outcome of reversals */
  @ApiPropertyOptional({ enum: CHANNEL_OUTCOMES, example: 'success' })
  @IsOptionalField()
  @outcomeRule('reverse')
  reverse?: ChannelOutcome;
}

export class ChannelCallsDto {
  @ApiProperty({ example: 12 }) pay!: number;
  @ApiProperty({ example: 1 }) query!: number;
  @ApiProperty({ example: 0 }) reverse!: number;
}

export class ChannelDto {
  @ApiProperty({ enum: PAYMENT_METHODS, example: 'quickpay' }) method!: PaymentMethod;
  @ApiProperty({ example: 20 }) latencyMs!: number;
  @ApiProperty({ enum: CHANNEL_OUTCOMES, example: 'success' }) pay!: ChannelOutcome;
  @ApiProperty({ enum: CHANNEL_OUTCOMES, example: 'success' }) query!: ChannelOutcome;
  @ApiProperty({ enum: CHANNEL_OUTCOMES, example: 'success' }) reverse!: ChannelOutcome;
  @ApiProperty({ type: ChannelCallsDto, description: 'Calls this instance made so far' }) calls!: ChannelCallsDto;
}
