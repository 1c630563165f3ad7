// Flat config: typescript-eslint's recommended rules for the whole tree.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', 'bench/results/**', '.data/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', __dirname: 'readonly', require: 'readonly', module: 'writable' },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-require-imports': 'off',
      'no-restricted-properties': [
        'error',
        {
          object: 'process',
          property: 'env',
          message: 'Read settings from the injected AppConfig, never process.env (src/platform/config is the only reader).',
        },
      ],
    },
  },
  {
    // The config loader, crash points and tooling outside src/ (the development launcher included) read the environment.
    files: ['src/platform/config/**', 'src/platform/core/crash-points.ts', 'scripts/**', 'bench/**', 'test/**', '**/*.spec.ts'],
    rules: { 'no-restricted-properties': 'off' },
  },
  {
    files: ['test/**', '**/*.spec.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        { selector: 'MemberExpression[object.name=/^(it|describe|test)$/][property.name=/^(only|skip)$/]', message: 'No .only or .skip in committed tests.' },
      ],
    },
  },
);
