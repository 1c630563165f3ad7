/**
 * Jest transformer: ts-jest, except that the files the @nestjs/swagger CLI plugin
 * works on (`*.dto.ts`, `*.controller.ts`) are compiled as `nest build` compiles
 * them: by a TypeScript program, with the plugin and the options of nest-cli.json.
 * So the OpenAPI document a spec reads is the one that ships.
 *
 * Why not ts-jest's `astTransformers`: the plugin reads types, so it needs a
 * program, and with `isolatedModules` (tsconfig.json) ts-jest compiles file by
 * file without one; turning that off builds a program for the whole tree in
 * every worker on every run (~10 s here), cached or not. This builds one only
 * when a DTO or controller is not in Jest's cache.
 */
const { createHash } = require('node:crypto');
const { existsSync, readFileSync } = require('node:fs');
const { dirname, join, resolve } = require('node:path');
const ts = require('typescript');
const tsJest = require('ts-jest').default;
const { before: swaggerPlugin } = require('@nestjs/swagger/plugin');

const ROOT = resolve(__dirname, '..', '..');
const nestCli = require(join(ROOT, 'nest-cli.json')).compilerOptions;
const pluginOptions = nestCli.plugins.find((p) => p.name === '@nestjs/swagger').options;
/** The plugin's own defaults (dtoFileNameSuffix, controllerFileNameSuffix). */
const PLUGIN_FILE = /\.(dto|entity|controller)\.ts$/;
const VERSION = ['1', ts.version, require('@nestjs/swagger/package.json').version, JSON.stringify(pluginOptions)].join(':');

let parsed;
let program;

function compilerConfig() {
  parsed ??= ts.getParsedCommandLineOfConfigFile(
    join(ROOT, nestCli.tsConfigPath),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      },
    },
  );
  return parsed;
}

/** The program, rebuilt (reusing what did not change) when the file's text is not what it last read. */
function programWith(path, text) {
  if (program?.getSourceFile(path)?.text === text) return program;
  const { options, fileNames } = compilerConfig();
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile;
  host.getSourceFile = (name, lang, ...rest) => (resolve(name) === path ? ts.createSourceFile(name, text, lang, true) : getSourceFile(name, lang, ...rest));
  program = ts.createProgram({ rootNames: [...new Set([...fileNames, path])], options, host, oldProgram: program });
  return program;
}

function compileWithPlugin(text, path) {
  const p = programWith(path, text);
  let code = '';
  let map;
  const result = p.emit(p.getSourceFile(path), (name, out) => (name.endsWith('.map') ? (map = out) : (code = out)), undefined, false, {
    before: [swaggerPlugin(pluginOptions, p)],
  });
  if (result.emitSkipped || !code) throw new Error(`TypeScript did not emit ${path}`);
  return { code: code.replace(/\n\/\/# sourceMappingURL=.*$/, ''), map };
}

/** The text of the local modules a file imports: their types shape the plugin's output. */
function importedText(text, path) {
  const out = [];
  for (const [, spec] of text.matchAll(/from '(\.[^']+)'/g)) {
    const file = resolve(dirname(path), spec) + '.ts';
    if (existsSync(file)) out.push(readFileSync(file, 'utf8'));
  }
  return out.join('\0');
}

module.exports = {
  createTransformer(tsJestOptions) {
    const inner = tsJest.createTransformer(tsJestOptions);
    const key = (text, path, base) =>
      PLUGIN_FILE.test(path) ? createHash('sha1').update(base).update(VERSION).update(importedText(text, path)).digest('hex') : base;
    return {
      canInstrument: false,
      getCacheKey: (text, path, opts) => key(text, path, inner.getCacheKey(text, path, opts)),
      getCacheKeyAsync: async (text, path, opts) => key(text, path, await inner.getCacheKeyAsync(text, path, opts)),
      process: (text, path, opts) => (PLUGIN_FILE.test(path) ? compileWithPlugin(text, resolve(path)) : inner.process(text, path, opts)),
      processAsync: async (text, path, opts) => (PLUGIN_FILE.test(path) ? compileWithPlugin(text, resolve(path)) : inner.processAsync(text, path, opts)),
    };
  },
};
