import { Body, Controller, Get, HttpCode, Post } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Auth, CurrentCaller } from '../auth/auth.decorators';
import type { Caller } from '../http/caller';
import { ApiErrors } from '../http/error-responses';
import { DiagnosticsService } from './diagnostics.service';
import { TouchDto, TouchResultDto, WhoAmIDto } from './dto/touch.dto';

/**
 * Smoke endpoints of the foundation: prove each identity works and that a
 * request reaches a Lua script through the whole stack. No business logic.
 */
@ApiTags('diagnostics')
@ApiErrors({ 429: 'Rate limited; see Retry-After', 503: 'Redis unreachable; see Retry-After' })
@Controller('diagnostics')
export class DiagnosticsController {
  constructor(private readonly diagnostics: DiagnosticsService) {}

  @Get('whoami')
  @Auth('user', 'merchant', 'service', 'admin')
  @ApiOperation({ summary: 'Who the credentials say you are (any of the four kinds)' })
  @ApiOkResponse({ type: WhoAmIDto })
  whoami(@CurrentCaller() caller: Caller): WhoAmIDto {
    return { kind: caller.kind, id: caller.id };
  }

  @Post('whoami')
  @HttpCode(200)
  @Auth('merchant')
  @ApiOperation({ summary: 'Signed-request check for merchants: echoes the merchant id if signature, timestamp and nonce are good' })
  @ApiOkResponse({ type: WhoAmIDto })
  @ApiErrors({ 400: 'Invalid body; the fields are named' })
  merchantWhoami(@CurrentCaller() caller: Caller, @Body() _body: TouchDto): WhoAmIDto {
    return { kind: caller.kind, id: caller.id };
  }

  @Post('touch')
  @HttpCode(200)
  @Auth('user')
  @ApiOperation({ summary: "Record a visit for the token's account through one Lua script (used by the http-floor benchmark)" })
  @ApiOkResponse({ type: TouchResultDto })
  @ApiErrors({ 400: 'Invalid body; the fields are named and nothing is recorded' })
  touch(@CurrentCaller() caller: Caller, @Body() dto: TouchDto): Promise<TouchResultDto> {
    return this.diagnostics.touch(caller.id, dto.label, (dto.ttlSeconds ?? 3600) * 1000).then((r) => ({ accountId: caller.id, label: dto.label, ...r }));
  }
}
