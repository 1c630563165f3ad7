import { Body, Controller, Delete, Get, HttpCode, Param, Put, Query, Res } from '@nestjs/common';
import { ApiCreatedResponse, ApiNoContentResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Auth } from '../../platform/auth/auth.decorators';
import { ApiErrors } from '../../platform/http/error-responses';
import { ReminderSettingsNotFoundError } from './close-reminder.errors';
import { CloseReminderStatus } from './close-reminder.status';
import { MerchantIdParamDto, ReminderSettingsDto, ReminderSettingsViewDto, ReminderStatusDto, SettingsPageDto, SettingsPageQueryDto } from './dto/settings.dto';
import { MerchantSettings, settingsView } from './merchant-settings';
import { OrderIdParamDto } from '../orders';

const noSettings = { description: 'The merchant has no close-reminder settings', errors: [new ReminderSettingsNotFoundError()] as [Error] };

/** Ops: which merchants' payers are reminded before an unpaid order closes, and what became of one order's reminder. */
@ApiTags('ops: close reminders')
@Auth('admin')
@ApiErrors({ 400: 'Invalid path, query or body; the fields are named and nothing is stored', 503: 'Redis unreachable; see Retry-After' })
@Controller('admin/close-reminder')
export class CloseReminderAdminController {
  constructor(
    private readonly settings: MerchantSettings,
    private readonly status: CloseReminderStatus,
  ) {}

  @Put('merchants/:merchantId')
  @ApiOperation({ summary: 'Set a merchant’s close reminders (every instance applies them within a second)' })
  @ApiCreatedResponse({ type: ReminderSettingsViewDto, description: 'The merchant had no settings' })
  @ApiOkResponse({ type: ReminderSettingsViewDto, description: 'Replaced' })
  async put(
    @Param() p: MerchantIdParamDto,
    @Body() dto: ReminderSettingsDto,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<ReminderSettingsViewDto> {
    const { created, settings } = await this.settings.save({ merchantId: p.merchantId, ...dto });
    void reply.status(created ? 201 : 200);
    return settingsView(settings);
  }

  @Get('merchants')
  @ApiOperation({ summary: 'Every merchant’s settings, by merchant id, a page at a time' })
  @ApiOkResponse({ type: SettingsPageDto })
  page(@Query() q: SettingsPageQueryDto): Promise<SettingsPageDto> {
    return this.settings.page(q.after ?? '', q.limit ?? 50);
  }

  @Get('merchants/:merchantId')
  @ApiOperation({ summary: 'One merchant’s settings' })
  @ApiOkResponse({ type: ReminderSettingsViewDto })
  @ApiErrors({ 404: noSettings })
  async get(@Param() p: MerchantIdParamDto): Promise<ReminderSettingsViewDto> {
    return settingsView(await this.settings.mustRead(p.merchantId));
  }

  @Delete('merchants/:merchantId')
  @HttpCode(204)
  @ApiOperation({ summary: 'Remove a merchant’s settings: its reminders not yet sent are skipped when they come due' })
  @ApiNoContentResponse({ description: 'Removed' })
  @ApiErrors({ 404: noSettings })
  async remove(@Param() p: MerchantIdParamDto): Promise<void> {
    if (!(await this.settings.remove(p.merchantId))) throw new ReminderSettingsNotFoundError();
  }

  @Get('orders/:orderId')
  @ApiOperation({ summary: 'What became of one order’s close reminder, with times' })
  @ApiOkResponse({ type: ReminderStatusDto })
  order(@Param() p: OrderIdParamDto): Promise<ReminderStatusDto> {
    return this.status.of(p.orderId);
  }
}
