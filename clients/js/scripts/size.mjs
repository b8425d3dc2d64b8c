// The size of @edgent/client as an app would ship it: one ESM bundle of client/dist/index.js
// (esbuild), minified, and gzipped. Prints bytes.
import { build } from 'esbuild';
import { gzipSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';

const entry = fileURLToPath(new URL('../client/dist/index.js', import.meta.url));
const bundle = async (minify) => {
  const out = await build({ entryPoints: [entry], bundle: true, format: 'esm', minify, write: false, platform: 'browser', target: 'es2022', legalComments: 'none' });
  return out.outputFiles[0].contents;
};
const plain = await bundle(false);
const min = await bundle(true);
const gz = gzipSync(min, { level: 9 });
console.log(`@edgent/client  bundle ${plain.length} B  minified ${min.length} B  minified+gzip ${gz.length} B`);
