import { Controller, Get } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Auth, CurrentCaller } from '../../platform/auth/auth.decorators';
import type { Caller } from '../../platform/http/caller';
import { ApiErrors } from '../../platform/http/error-responses';
import { ReminderSettingsNotFoundError } from './close-reminder.errors';
import { ReminderSettingsViewDto } from './dto/settings.dto';
import { MerchantSettings, settingsView } from './merchant-settings';

/** A merchant reads its own close-reminder settings (HMAC-signed). */
@ApiTags('close reminders (merchants)')
@Auth('merchant')
@ApiErrors({ 503: 'Redis unreachable; see Retry-After' })
@Controller('merchant/close-reminder')
export class MerchantCloseReminderController {
  constructor(private readonly settings: MerchantSettings) {}

  @Get()
  @ApiOperation({ summary: 'The calling merchant’s close-reminder settings' })
  @ApiOkResponse({ type: ReminderSettingsViewDto })
  @ApiErrors({ 404: { description: 'No close-reminder settings for this merchant', errors: [new ReminderSettingsNotFoundError()] } })
  async get(@CurrentCaller() caller: Caller): Promise<ReminderSettingsViewDto> {
    return settingsView(await this.settings.mustRead(caller.id));
  }
}
