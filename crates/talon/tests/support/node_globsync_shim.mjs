// Preloaded (`node --import <this file>`) so the MCP conformance suite runs on Node 20.
//
// The suite imports `globSync` from `fs`, which Node added in 22; on 20 the import fails before
// any scenario runs. This module registers itself as a module-resolution hook that hands every
// importer of `fs` a module re-exporting the real `fs` plus a `globSync` (Node's own where it
// exists, else a small walker that understands the `**/name` patterns the suite uses).
import { register } from 'node:module';
import { isMainThread } from 'node:worker_threads';

if (isMainThread) register(import.meta.url);

const SHIM = 'talon-shim:fs';

export async function resolve(specifier, context, next) {
  if ((specifier === 'fs' || specifier === 'node:fs') && context.parentURL !== SHIM) {
    return { url: SHIM, shortCircuit: true };
  }
  return next(specifier, context);
}

const SOURCE = `
import fs from 'node:fs';
import path from 'node:path';
export * from 'node:fs';
export default fs;
function walk(root, rel, out) {
  for (const entry of fs.readdirSync(path.join(root, rel), { withFileTypes: true })) {
    const child = rel ? rel + '/' + entry.name : entry.name;
    if (entry.isDirectory()) walk(root, child, out); else out.push(child);
  }
  return out;
}
function toRegExp(pattern) {
  const literal = (s) => s.replace(/[.+^$()|[\\]\\\\{}]/g, '\\\\$&').replace(/\\*/g, '[^/]*').replace(/\\?/g, '[^/]');
  return new RegExp('^' + pattern.split('**/').map(literal).join('(?:.*/)?') + '$');
}
export const globSync = fs.globSync ?? function globSync(pattern, options = {}) {
  const root = options.cwd ?? process.cwd();
  const re = toRegExp(String(pattern));
  return walk(root, '', []).filter((f) => re.test(f));
};
`;

export async function load(url, context, next) {
  if (url !== SHIM) return next(url, context);
  return { format: 'module', source: SOURCE, shortCircuit: true };
}
