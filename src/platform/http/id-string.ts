import { applyDecorators } from '@nestjs/common';
import { IsString, Matches, MaxLength } from 'class-validator';

/** A string id of at most `maxLength` characters matching `re`. */
export const IsIdString = (maxLength: number, re: RegExp, message: string) => applyDecorators(IsString(), MaxLength(maxLength), Matches(re, { message }));
