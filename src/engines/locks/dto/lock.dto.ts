import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsInt, IsString, Matches, Max, MaxLength, Min } from 'class-validator';
import { IsOptionalField } from '../../../platform/http/optional-field';
import { MAX_LEASE_MS } from '../lock.service';

/** The longest an HTTP acquire waits (the request stays open that long). */
export const HTTP_MAX_WAIT_MS = 30_000;
const OWNER_RE = /^[A-Za-z0-9_.:-]{1,128}$/;

/** HTTP locks live apart from the service's own (`ext:<name>`), so a caller cannot block an order or a plan. */
export const HTTP_LOCK_PREFIX = 'ext:';
const HTTP_NAME_RE = /^[A-Za-z0-9_.:-]{1,124}$/;

export class LockNameParamDto {
  /** The lock (1-124 characters of A-Z a-z 0-9 _ . : -), in the HTTP callers' own namespace */
  @ApiProperty({ example: 'inventory:sku-42' })
  @IsString()
  @MaxLength(124)
  @Matches(HTTP_NAME_RE, { message: 'name must be 1-124 characters of A-Z a-z 0-9 _ . : -' })
  name!: string;
}

export class LockOwnerDto {
  /** The caller's token for this logical operation (kept per calling service: two services never share an owner) */
  @ApiProperty({ example: 'settlement-run-20261122-7' })
  @IsString()
  @MaxLength(128)
  @Matches(OWNER_RE, { message: 'owner must be 1-128 characters of A-Z a-z 0-9 _ . : -' })
  owner!: string;
}

export class AcquireLockDto extends LockOwnerDto {
  /** Lease, ms: the hold ends unless renewed or released before */
  @ApiProperty({ example: 10_000 })
  @IsInt()
  @Min(100)
  @Max(MAX_LEASE_MS)
  leaseMs!: number;

  /** How long to wait for a held lock, ms (0: answer at once) */
  @ApiPropertyOptional({ default: 0 })
  @IsOptionalField()
  @IsInt()
  @Min(0)
  @Max(HTTP_MAX_WAIT_MS)
  waitMs?: number;

  /** write: exclusive; read: shared with other readers */
  @ApiPropertyOptional({ default: 'write' })
  @IsOptionalField()
  @IsIn(['write', 'read'])
  mode?: 'write' | 'read';
}

export class RenewLockDto extends LockOwnerDto {
  /** Lease from now, ms (a renew never shortens the current lease) */
  @ApiProperty({ example: 10_000 })
  @IsInt()
  @Min(100)
  @Max(MAX_LEASE_MS)
  leaseMs!: number;
}

export class ReleaseLockDto extends LockOwnerDto {}

export class AcquireResultDto {
  @ApiProperty({ description: 'Grows with every new hold of this lock; send it with writes so a stale holder is refused', example: 1795302000123456 })
  fencingToken!: number;
  @ApiProperty({ description: 'Lease end, epoch ms (Redis clock)', example: 1795302010123 }) expiresAt!: number;
  @ApiProperty({ description: "The owner's hold count (above 1 for a reentrant acquire)", example: 1 }) holdCount!: number;
}

export class RenewResultDto {
  @ApiProperty({ description: 'New lease end, epoch ms (Redis clock)', example: 1795302020123 }) expiresAt!: number;
}

export class ReleaseResultDto {
  @ApiProperty({ description: "The owner's remaining holds; 0 means the owner no longer holds the lock", example: 0 }) holdCount!: number;
}

export class LockHolderDto {
  @ApiProperty({ example: 'svc:settlement:settlement-run-20261122-7' }) owner!: string;
  @ApiProperty({ example: 1 }) count!: number;
  @ApiProperty({ description: 'epoch ms', example: 1795302010123 }) expiresAt!: number;
}

export class LockStateDto {
  @ApiProperty({ example: 'inventory:sku-42' }) name!: string;
  @ApiProperty({ enum: ['write', 'read'] }) mode!: 'write' | 'read';
  @ApiProperty({ type: [LockHolderDto] }) holders!: LockHolderDto[];
  @ApiProperty({ description: 'Time left on the lock, ms', example: 9450 }) ttlMs!: number;
  @ApiProperty({ description: 'The newest fencing token issued for this lock', example: 1795302000123456 }) fencingToken!: number;
}
