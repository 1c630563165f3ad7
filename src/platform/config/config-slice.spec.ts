import { Transform } from 'class-transformer';
import { IsInt, IsOptional, Min } from 'class-validator';
import { expectConfigError } from '../../../test/support/config-errors';
import { AppConfig } from './app-config';
import { configSlices, defineConfigSlice, isConfigSlice } from './config-slice';
import { toInt } from './env-validation';
import { loadConfig } from './load-config';

class WidgetsEnv {
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  WIDGETS_PER_BOX?: number;
}

class WidgetsConfig {
  perBox!: number;
}

describe(defineConfigSlice.name, () => {
  // Loaded before the slice below is defined: a slice defined later is built from the same environment.
  const early = loadConfig({ NODE_ENV: 'test', WIDGETS_PER_BOX: '7' });
  const widgets = defineConfigSlice({
    name: 'widgets',
    token: WidgetsConfig,
    schema: WidgetsEnv,
    build: (s): WidgetsConfig => ({ perBox: s.WIDGETS_PER_BOX ?? 12 }),
  });

  it('adds the slice to the ones loadConfig validates and builds', () => {
    expect(configSlices()).toContain(widgets);
    expect(isConfigSlice(widgets)).toBe(true);
    expect(isConfigSlice({ ...widgets })).toBe(false);
    const config = loadConfig({ WIDGETS_PER_BOX: '3' });
    expect(config.slices.get('widgets')).toEqual({ perBox: 3 });
    expect(widgets.of(config)).toEqual({ perBox: 3 });
    expect(widgets.of(loadConfig({}))).toEqual({ perBox: 12 });
  });

  it("stops loadConfig with a ConfigError naming the slice's bad variable", () => {
    const err = expectConfigError(() => loadConfig({ WIDGETS_PER_BOX: '0' }), 'WIDGETS_PER_BOX');
    expect(err.message).toBe('WIDGETS_PER_BOX must not be less than 1');
  });

  it('provides the settings under the slice token, from the AppConfig', () => {
    const config = loadConfig({ WIDGETS_PER_BOX: '5' });
    expect(widgets.provider).toMatchObject({ provide: WidgetsConfig, inject: [AppConfig] });
    expect(widgets.provider.useFactory(config)).toBe(config.slices.get('widgets'));
  });

  it('builds a slice defined after loadConfig ran from the environment it was loaded from, once', () => {
    expect(early.slices.has('widgets')).toBe(false);
    const built = widgets.of(early);
    expect(built).toEqual({ perBox: 7 });
    expect(widgets.of(early)).toBe(built);
  });

  it('keeps the environment out of comparisons and serialisation', () => {
    const config = loadConfig({ WIDGETS_PER_BOX: '5', SOME_SECRET: 'do-not-show' });
    expect(config.source.SOME_SECRET).toBe('do-not-show');
    expect(Object.keys(config)).not.toContain('source');
    expect(JSON.stringify(config)).not.toContain('do-not-show');
  });

  it('refuses a second slice with the same name or one of the same variables', () => {
    class OtherEnv {
      @IsOptional()
      @Transform(toInt)
      @IsInt()
      WIDGETS_PER_BOX?: number;
    }
    expect(() => defineConfigSlice({ name: 'widgets', token: WidgetsConfig, schema: WidgetsEnv, build: () => ({ perBox: 1 }) })).toThrow(
      'configuration slice "widgets" is defined twice',
    );
    expect(() => defineConfigSlice({ name: 'gadgets', token: WidgetsConfig, schema: OtherEnv, build: () => ({ perBox: 1 }) })).toThrow(
      'WIDGETS_PER_BOX is declared by both the "widgets" and the "gadgets" configuration slices',
    );
    expect(configSlices().map((s) => s.name)).toEqual(['widgets']);
  });
});
