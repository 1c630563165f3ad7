import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { ActivityIdField, CurrencyField, MerchantIdField, PositiveIntField, TitleField, WindowEndField } from '../../../engines/sharded-pool/activity-fields';
import { IsInt, Max, Min } from 'class-validator';
import { IsOptionalField } from '../../../platform/http/optional-field';
import { MAX_AMOUNT } from '../../../platform/core/money';

const MINUTE_MS = 60_000;

export class CreateRedEnvelopeActivityDto {
  @ActivityIdField('nye-quiz') activityId!: string;
  /** The merchant whose wallet funds the rain */
  @MerchantIdField('sponsorMerchantId', 'm_demo') sponsorMerchantId!: string;
  @TitleField(64, 'New year quiz rain') title!: string;

  @CurrencyField() currency!: string;

  /** Minor units, split over `count` envelopes; taken from the sponsor's wallet (top it up first) */
  @PositiveIntField(MAX_AMOUNT, 10_000) totalAmount!: number;

  /** At most RED_ENVELOPE_MAX_COUNT */
  @PositiveIntField(10_000_000, 100) count!: number;

  @WindowEndField('startsAt', 0) startsAt!: string;
  @WindowEndField('endsAt', 30 * MINUTE_MS) endsAt!: string;

  /** The smallest envelope, minor units */
  @ApiPropertyOptional({ example: 1, default: 1 })
  @IsOptionalField()
  @IsInt()
  @Min(1)
  @Max(MAX_AMOUNT)
  minAmount?: number;

  @ApiPropertyOptional({ example: 1, default: 1, maximum: 100 })
  @IsOptionalField()
  @IsInt()
  @Min(1)
  @Max(100)
  perUserLimit?: number;

  /** Sub-pools on different hash slots, for a hot rain (at most RED_ENVELOPE_MAX_SUBPOOLS and the count) */
  @ApiPropertyOptional({ example: 1, default: 1, maximum: 64 })
  @IsOptionalField()
  @IsInt()
  @Min(1)
  @Max(64)
  subPools?: number;
}

export class RedEnvelopeActivityIdParamDto {
  /** The `activityId` your rain was created with */
  @ActivityIdField('nye-quiz') activityId!: string;
}

const STATES = ['FUNDING', 'LOADING', 'READY', 'OPEN', 'ENDED', 'SETTLED'];

export class ProgressDto {
  @ApiProperty({ example: 1_000_000 }) loaded!: number;
  @ApiProperty({ example: 1_000_000 }) total!: number;
}

export class StallDto {
  @ApiProperty({ enum: ['funding', 'load', 'end', 'refund', 'credit'], example: 'refund' }) step!: string;
  @ApiProperty({ example: "the sponsor's wallet refused the refund of 300: BALANCE_LIMIT …" }) reason!: string;
  @ApiProperty({ example: '2026-12-31T12:10:01.000Z' }) since!: string;
}

export class RedEnvelopeActivityViewDto {
  @ApiProperty({ example: 'nye-quiz' }) activityId!: string;
  @ApiProperty({ example: 'm_demo' }) sponsorMerchantId!: string;
  @ApiProperty({ example: 'New year quiz rain' }) title!: string;
  @ApiProperty({ example: 'CNY' }) currency!: string;
  @ApiProperty({ example: 1_000_000 }) totalAmount!: number;
  @ApiProperty({ example: 10_000 }) count!: number;
  @ApiProperty({ example: 1 }) minAmount!: number;
  @ApiProperty({ example: 1 }) perUserLimit!: number;
  @ApiProperty({ example: 1 }) subPools!: number;
  @ApiProperty({ example: '2026-12-31T12:00:00.000Z' }) startsAt!: string;
  @ApiProperty({ example: '2026-12-31T12:10:00.000Z' }) endsAt!: string;
  @ApiProperty({ enum: STATES, example: 'LOADING' }) state!: string;
  @ApiProperty({ type: ProgressDto }) progress!: ProgressDto;
  @ApiProperty({ example: '3f2a…', description: 'The split’s seed: the same seed gives the same amounts' }) seed!: string;
  @ApiPropertyOptional({ example: 1234, description: 'Left over at the end and credited back to the sponsor' }) refundedAmount?: number;
  @ApiPropertyOptional({
    type: StallDto,
    description: 'Present while a step of the rain cannot advance (logged at error, counted in red_envelope_stalls_total): fix the cause, then re-drive',
  })
  stalled?: StallDto;

  @ApiPropertyOptional({
    type: [StallDto],
    description: 'Every step that cannot advance, oldest first (a rain can stall at two: dead-lettered credits and its end); `stalled` is the first',
  })
  stalls?: StallDto[];
}

export class CountAmountDto {
  @ApiProperty({ example: 10 }) count!: number;
  @ApiProperty({ example: 1234 }) amount!: number;
}

export class SponsorEntriesDto {
  @ApiProperty({ example: 1_000_000 }) funded!: number;
  @ApiProperty({ example: 1234 }) refunded!: number;
}

export class ReconciliationDto {
  @ApiProperty({ example: 1_000_000 }) total!: number;
  @ApiProperty({ example: 10_000 }) count!: number;
  @ApiProperty({ type: CountAmountDto }) grabbed!: CountAmountDto;
  @ApiProperty({ type: CountAmountDto }) credited!: CountAmountDto;
  @ApiProperty({ type: CountAmountDto }) pending!: CountAmountDto;
  @ApiProperty({ type: CountAmountDto }) dead!: CountAmountDto;
  @ApiProperty({ type: CountAmountDto }) left!: CountAmountDto;
  @ApiProperty({ type: CountAmountDto }) refunded!: CountAmountDto;
  @ApiProperty({ type: CountAmountDto, description: 'Funded but not yet in an armed sub-pool: the rain is loading (0 once READY)' })
  loading!: CountAmountDto;
  @ApiProperty({
    type: SponsorEntriesDto,
    description: 'The sponsor’s ledger: the funding debit and the refund credit of this rain, by their kinds (0 when absent)',
  })
  sponsor!: SponsorEntriesDto;
  @ApiProperty({
    example: true,
    description:
      'total = grabbed + left + refunded + loading, and grabbed = credited + pending + dead; past FUNDING the sponsor’s funding is the total; its refund never exceeds refunded, and equals it once SETTLED',
  })
  balanced!: boolean;
}

export class BucketDto {
  @ApiProperty({ example: 1 }) from!: number;
  @ApiProperty({ example: 20 }) to!: number;
  @ApiProperty({ example: 412 }) count!: number;
}

export class DistributionDto {
  @ApiProperty({ example: 10_000 }) count!: number;
  @ApiProperty({ example: 1 }) min!: number;
  @ApiProperty({ example: 199 }) max!: number;
  @ApiProperty({ example: 100 }) mean!: number;
  @ApiProperty({ example: 99 }) p50!: number;
  @ApiProperty({ example: 180 }) p90!: number;
  @ApiProperty({ example: 197 }) p99!: number;
  @ApiProperty({ type: [BucketDto] }) histogram!: BucketDto[];
}

export class RedriveDto {
  @ApiProperty({ example: 3, description: 'Dead-lettered grabs put back on their credit streams' }) redriven!: number;
}

export class GrabResultDto {
  @ApiProperty({ enum: ['GRABBED', 'ALREADY_GRABBED', 'NONE_LEFT', 'NOT_STARTED', 'ENDED'], example: 'GRABBED' }) status!: string;
  @ApiPropertyOptional({ example: 'nye-quiz.4711' }) envelopeId?: string;
  @ApiPropertyOptional({ example: 188, description: 'Minor units' }) amount?: number;
}

export class MyEnvelopeDto {
  @ApiProperty({ example: 'nye-quiz.4711' }) envelopeId!: string;
  @ApiProperty({ example: 188 }) amount!: number;
  @ApiProperty({ enum: ['PENDING', 'CREDITED', 'DEAD'], example: 'CREDITED' }) crediting!: string;
}

export class MyEnvelopesDto {
  @ApiProperty({ type: [MyEnvelopeDto] }) items!: MyEnvelopeDto[];
}

export class RainScreenDto {
  @ApiProperty({ example: 'nye-quiz' }) activityId!: string;
  @ApiProperty({ example: 'New year quiz rain' }) title!: string;
  @ApiProperty({ enum: STATES, example: 'OPEN' }) state!: string;
  @ApiProperty({ example: '2026-12-31T12:00:00.000Z' }) startsAt!: string;
  @ApiProperty({ example: '2026-12-31T12:10:00.000Z' }) endsAt!: string;
  @ApiProperty({ example: 10_000 }) count!: number;
  @ApiProperty({ example: 4_212, description: 'Envelopes left' }) left!: number;
}
