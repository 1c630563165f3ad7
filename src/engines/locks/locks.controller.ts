import { Body, Controller, Get, HttpCode, Param, Post, Res } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Auth, CurrentCaller } from '../../platform/auth/auth.decorators';
import type { Caller } from '../../platform/http/caller';
import { ApiError } from '../../platform/http/api.error';
import { ApiErrors } from '../../platform/http/error-responses';
import {
  AcquireLockDto,
  AcquireResultDto,
  HTTP_LOCK_PREFIX,
  LockNameParamDto,
  LockStateDto,
  ReleaseLockDto,
  ReleaseResultDto,
  RenewLockDto,
  RenewResultDto,
} from './dto/lock.dto';
import { LockContendedError, LockLostError, LockUpgradeRefusedError } from './lock.errors';
import { LockService } from './lock.service';

const nobodyHolds = (name: string) => new ApiError(404, 'NOT_FOUND', `Nobody holds lock ${name}`);
/** The documented examples' lock, as the engine names it (the HTTP namespace prefixed). */
const EXAMPLE_LOCK = `${HTTP_LOCK_PREFIX}inventory:sku-42`;
const lockLost = new LockLostError(EXAMPLE_LOCK, 'settlement-run-20261122-7');

/**
 * The lock engine for other internal services (service token). Their locks
 * live in a namespace of their own (`ext:<name>`), so they cannot block the
 * service's order and plan locks. Owners are kept per calling service
 * (`svc:<service>:<owner>`), so one service can never renew or release
 * another's hold. HTTP holds have no watchdog: the
 * caller renews before its lease ends.
 */
@ApiTags('locks (internal services)')
@Auth('service')
@ApiErrors({ 400: 'Invalid name or body; the fields are named', 503: 'Redis unreachable: the lock fails closed; see Retry-After' })
@Controller('locks')
export class LocksController {
  constructor(private readonly locks: LockService) {}

  @Post(':name/acquire')
  @HttpCode(200)
  @ApiOperation({ summary: 'Take the lock (reentrant for the same owner), waiting up to waitMs' })
  @ApiOkResponse({ type: AcquireResultDto })
  @ApiErrors({
    409: {
      description:
        'LOCK_CONTENDED: held by another owner; details.remainingTtlMs and Retry-After say for how long. LOCK_UPGRADE_REFUSED: this owner holds a read lock and asked for write',
      errors: [new LockContendedError(EXAMPLE_LOCK, 2400), new LockUpgradeRefusedError(EXAMPLE_LOCK)],
    },
  })
  async acquire(
    @Param() p: LockNameParamDto,
    @Body() dto: AcquireLockDto,
    @CurrentCaller() caller: Caller,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<AcquireResultDto> {
    // A caller that hangs up while waiting (its own timeout, a crash) must not be given the lock afterwards: it
    // believes it failed, and nobody would release the hold before its lease ends. Its connection closing ends the
    // wait, and a hold taken just as it closed is given back.
    const gone = new AbortController();
    const hungUp = () => {
      if (!reply.raw.writableEnded) gone.abort();
    };
    reply.raw.once('close', hungUp);
    // A connection that closed before this handler ran (while a guard awaited Redis) has emitted 'close' already.
    if (reply.raw.destroyed) hungUp();
    try {
      const lock = await this.locks.acquire(lockName(p), {
        owner: ownerOf(caller, dto.owner),
        leaseMs: dto.leaseMs,
        waitMs: dto.waitMs ?? 0,
        mode: dto.mode,
        watchdog: false,
        signal: gone.signal,
      });
      if (gone.signal.aborted) {
        await lock.release();
        throw new ApiError(499, 'CLIENT_CLOSED', 'The caller closed the connection while waiting; the hold was given back');
      }
      return { fencingToken: lock.fencingToken, expiresAt: lock.expiresAt, holdCount: lock.holdCount };
    } finally {
      reply.raw.off('close', hungUp);
    }
  }

  @Post(':name/renew')
  @HttpCode(200)
  @ApiOperation({ summary: "Extend the owner's lease" })
  @ApiOkResponse({ type: RenewResultDto })
  @ApiErrors({ 409: { description: 'LOCK_LOST: the owner does not hold the lock (its lease ended)', errors: [lockLost] } })
  renew(@Param() p: LockNameParamDto, @Body() dto: RenewLockDto, @CurrentCaller() caller: Caller): Promise<RenewResultDto> {
    return this.locks.renew(lockName(p), ownerOf(caller, dto.owner), dto.leaseMs);
  }

  @Post(':name/release')
  @HttpCode(200)
  @ApiOperation({ summary: 'Give back one hold; at 0 the lock is free and waiters wake' })
  @ApiOkResponse({ type: ReleaseResultDto })
  @ApiErrors({ 409: { description: 'LOCK_LOST: the owner does not hold the lock', errors: [lockLost] } })
  release(@Param() p: LockNameParamDto, @Body() dto: ReleaseLockDto, @CurrentCaller() caller: Caller): Promise<ReleaseResultDto> {
    return this.locks.release(lockName(p), ownerOf(caller, dto.owner));
  }

  @Get(':name')
  @ApiOperation({ summary: 'Who holds the lock, how many times, and for how long' })
  @ApiOkResponse({ type: LockStateDto })
  @ApiErrors({ 404: { description: 'Nobody holds the lock', errors: [nobodyHolds('inventory:sku-42')] } })
  async inspect(@Param() p: LockNameParamDto): Promise<LockStateDto> {
    const state = await this.locks.inspect(lockName(p));
    if (!state) throw nobodyHolds(p.name);
    return { ...state, name: p.name };
  }
}

const ownerOf = (caller: Caller, owner: string) => `svc:${caller.id}:${owner}`;
const lockName = (p: LockNameParamDto) => HTTP_LOCK_PREFIX + p.name;
