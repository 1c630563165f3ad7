import { Body, Controller, HttpCode, Post } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { AppConfig } from '../config/app-config';
import { ApiErrors } from '../http/error-responses';
import { DEV_TAG } from '../http/swagger';
import { Public } from './auth.decorators';
import { devTokenSigner, type DevToken } from './dev-token';
import { DevTokenDto, DevTokenRequestDto } from './dto/dev-token.dto';

/**
 * An app-user token without the terminal (what `npm run token` prints), for Swagger UI. Development only: the
 * module is not part of a production service (NODE_ENV=production), nor of one whose tokens are not HS256 (an
 * identity provider's private key signs those).
 */
@ApiTags(DEV_TAG)
@Public()
@ApiErrors({ 400: 'Invalid body; the fields are named', 429: 'Rate limited; see Retry-After' })
@Controller('dev')
export class DevTokenController {
  private readonly mint: (accountId: string, ttlSeconds: number) => DevToken;

  constructor(config: AppConfig) {
    this.mint = devTokenSigner(config.jwt);
  }

  @Post('token')
  @HttpCode(200)
  @ApiOperation({ summary: 'Development only: a token for an app user, to paste into AppUserJwt under "Authorize"' })
  @ApiOkResponse({ type: DevTokenDto })
  token(@Body() dto: DevTokenRequestDto): DevTokenDto {
    return this.mint(dto.accountId, dto.ttlSeconds ?? 86_400);
  }
}
