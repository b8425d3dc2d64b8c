// Prints the built app's size (ui/dist), raw and gzip, file by file and in total: what a
// browser downloads the first time. Run after `bash scripts/ui.sh` (or `npm run build` here).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { gzipSync } from 'node:zlib';

const dist = new URL('../dist/', import.meta.url).pathname;
const files = [];
(function walk(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path);
    else files.push(path);
  }
})(dist);

let raw = 0;
let gzip = 0;
for (const path of files.sort()) {
  const bytes = readFileSync(path);
  const z = gzipSync(bytes, { level: 9 }).length;
  raw += bytes.length;
  gzip += z;
  console.log(`${relative(dist, path).padEnd(40)} ${String(bytes.length).padStart(9)} B  ${String(z).padStart(8)} B gzip`);
}
console.log(`${'total'.padEnd(40)} ${String(raw).padStart(9)} B  ${String(gzip).padStart(8)} B gzip`);
