import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import * as ts from 'typescript';

/**
 * One error family below HTTP: outside the HTTP layer, code throws domain errors (a `kind`, a `code`, no
 * status), and only the HTTP layer turns a kind into a status (src/platform/http/status-by-kind.ts). The
 * HTTP layer is src/platform/http, controllers, route decorators and DTOs; everything else (engines,
 * features, the rest of platform, guards and verifiers included) neither builds nor names an HTTP error.
 */
const ROOT = join(__dirname, '..', '..');
const SRC = join(ROOT, 'src');

const isHttpLayer = (path: string): boolean =>
  path.startsWith('src/platform/http/') || /\.(controller|decorators)\.ts$/.test(path) || path.split('/').includes('dto');

/** HTTP errors by name: the service's own and Nest's (`NotFoundException`, ...). */
const HTTP_ERROR = /^(ApiError|HttpException|\w+Exception)$/;
/** Members through which an error would carry a status. */
const STATUS_MEMBER = /^(status|statusCode|httpStatus|getStatus)$/;

const nameOf = (n: ts.Node | undefined): string | undefined =>
  n && (ts.isIdentifier(n) || ts.isPrivateIdentifier(n) || ts.isStringLiteral(n)) ? n.text : undefined;

/** What in one file breaks the rule, each as `path:line what`. */
function violations(path: string, text: string): string[] {
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const out: string[] = [];
  const at = (n: ts.Node, what: string) => out.push(`${path}:${file.getLineAndCharacterOfPosition(n.getStart(file)).line + 1} ${what}`);
  const http = isHttpLayer(path);
  const visit = (n: ts.Node): void => {
    // The map from kind to status is read in the HTTP layer only.
    if (!http && ts.isIdentifier(n) && n.text === 'STATUS_BY_KIND') at(n, 'reads STATUS_BY_KIND outside the HTTP layer');
    if (!http && ts.isImportDeclaration(n) && ts.isStringLiteral(n.moduleSpecifier)) {
      const from = n.moduleSpecifier.text;
      if (/(^|\/)http\/api\.error$/.test(from)) at(n, `imports ${from} outside the HTTP layer`);
      if (from === '@nestjs/common') {
        const named = n.importClause?.namedBindings;
        if (named && ts.isNamedImports(named))
          for (const el of named.elements) if (HTTP_ERROR.test(el.name.text)) at(el, `imports ${el.name.text} outside the HTTP layer`);
      }
    }
    if (!http && ts.isNewExpression(n) && HTTP_ERROR.test(nameOf(n.expression) ?? '')) at(n, `throws ${nameOf(n.expression)} outside the HTTP layer`);
    // An error class outside src/platform/http (controllers' and DTOs' included) carries a kind, never a status.
    if (ts.isClassDeclaration(n) && !path.startsWith('src/platform/http/')) {
      const base = n.heritageClauses?.find((h) => h.token === ts.SyntaxKind.ExtendsKeyword)?.types[0]?.expression;
      const baseName = base?.getText(file).split('.').pop() ?? '';
      if (/(Error|Exception)$/.test(baseName)) {
        const cls = n.name?.text ?? '(anonymous)';
        if (HTTP_ERROR.test(baseName)) at(n, `${cls} extends ${baseName}`);
        for (const m of n.members) {
          const params = ts.isConstructorDeclaration(m) ? m.parameters.filter((p) => p.modifiers?.length) : [];
          for (const named of [m, ...params]) {
            const name = nameOf((named as ts.NamedDeclaration).name);
            if (name && STATUS_MEMBER.test(name)) at(named, `${cls} has a member ${name}`);
          }
        }
        const statusNumbers = (c: ts.Node): void => {
          if (ts.isNumericLiteral(c) && /^[1-5]\d\d$/.test(c.text)) at(c, `${cls} holds the number ${c.text}, an HTTP status`);
          ts.forEachChild(c, statusNumbers);
        };
        n.members.forEach(statusNumbers);
      }
    }
    ts.forEachChild(n, visit);
  };
  visit(file);
  return out;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return e.name.endsWith('.ts') && !e.name.endsWith('.spec.ts') ? [path] : [];
  });
}

describe('one error family below HTTP', () => {
  it('no module outside the HTTP layer builds, imports or extends an HTTP error, and no error class carries a status', () => {
    const files = sourceFiles(SRC);
    expect(files.length).toBeGreaterThan(100);
    const found = files.flatMap((f) => violations(relative(ROOT, f).split(sep).join('/'), readFileSync(f, 'utf8')));
    expect(found).toEqual([]);
  });

  describe('the scan finds each way of breaking the rule', () => {
    it.each<[string, string, string, RegExp]>([
      [
        'a service that throws an ApiError',
        'src/features/messages/pending-actions.service.ts',
        `import { ApiError } from '../../platform/http/api.error';\nexport const f = () => { throw new ApiError(400, 'X', 'x'); };\n`,
        /imports \.\.\/\.\.\/platform\/http\/api\.error[\s\S]*throws ApiError/,
      ],
      [
        'a verifier that throws a Nest exception',
        'src/platform/auth/jwt-verifier.service.ts',
        `import { UnauthorizedException } from '@nestjs/common';\nexport const f = () => { throw new UnauthorizedException(); };\n`,
        /imports UnauthorizedException[\s\S]*throws UnauthorizedException/,
      ],
      [
        'a script error with a status',
        'src/platform/scripts/script.errors.ts',
        `export class ScriptError extends Error {\n  constructor(readonly script: string, readonly status: number) { super(script); }\n}\n`,
        /ScriptError has a member status/,
      ],
      [
        'a domain error that keeps an HTTP status number',
        'src/features/orders/order.errors.ts',
        `export class OrderPaid extends DomainError {\n  readonly kind = 'conflict';\n  readonly httpCode = 409;\n}\n`,
        /OrderPaid holds the number 409/,
      ],
      [
        'an engine error built on HttpException',
        'src/engines/locks/lock.errors.ts',
        `import { HttpException } from '@nestjs/common';\nexport class LockLost extends HttpException {}\n`,
        /LockLost extends HttpException/,
      ],
      [
        'a feature that maps a kind to a status itself',
        'src/features/wallet/wallet.service.ts',
        `import { STATUS_BY_KIND } from '../../platform/http/status-by-kind';\nexport const s = STATUS_BY_KIND.conflict;\n`,
        /reads STATUS_BY_KIND outside the HTTP layer/,
      ],
    ])('%s', (_label, path, text, expected) => {
      expect(violations(path, text).join('\n')).toMatch(expected);
    });

    it('leaves the HTTP layer alone: a controller may answer with an ApiError', () => {
      const text = `import { ApiError } from '../../platform/http/api.error';\nexport const f = () => { throw new ApiError(404, 'NOT_FOUND', 'x'); };\n`;
      expect(violations('src/engines/locks/locks.controller.ts', text)).toEqual([]);
      expect(violations('src/platform/http/json-body.ts', text)).toEqual([]);
    });
  });
});
