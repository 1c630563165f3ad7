import { Body, Controller, HttpCode, Post } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { createSigner } from 'fast-jwt';
import { AppConfig } from '../config/app-config';
import { ApiErrors } from '../http/error-responses';
import { DEV_TAG } from '../http/swagger';
import { Public } from './auth.decorators';
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
  private readonly sign: (payload: { sub: string; exp: number }) => string;

  constructor(config: AppConfig) {
    const { key, issuer, audience } = config.jwt;
    this.sign = createSigner({ key, algorithm: 'HS256', ...(issuer ? { iss: issuer } : {}), ...(audience ? { aud: audience } : {}) });
  }

  @Post('token')
  @HttpCode(200)
  @ApiOperation({ summary: 'Development only: a token for an app user, to paste into AppUserJwt under "Authorize"' })
  @ApiOkResponse({ type: DevTokenDto })
  token(@Body() dto: DevTokenRequestDto): DevTokenDto {
    const exp = Math.floor(Date.now() / 1000) + (dto.ttlSeconds ?? 86_400);
    return { accountId: dto.accountId, token: this.sign({ sub: dto.accountId, exp }), expiresAt: new Date(exp * 1000).toISOString() };
  }
}
