// Builds the dashboard into dist/: one JS and one CSS bundle (esbuild,
// minified), index.html and the icon, each with a pre-gzipped .gz twin
// that the Go server sends to clients accepting gzip. Prints the sizes.
import * as esbuild from "esbuild";
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { gzipSync } from "node:zlib";

const out = "dist";
for (const f of readdirSync(out, { withFileTypes: true })) {
  if (f.name !== ".keep") rmSync(`${out}/${f.name}`, { recursive: true });
}
mkdirSync(out, { recursive: true });
await esbuild.build({
  entryPoints: { app: "src/main.js" },
  bundle: true,
  minify: true,
  format: "esm",
  target: "es2020",
  outdir: out,
  legalComments: "none",
  logLevel: "warning",
});
copyFileSync("src/index.html", `${out}/index.html`);
copyFileSync("src/favicon.svg", `${out}/favicon.svg`);

let raw = 0, gz = 0;
for (const name of readdirSync(out)) {
  if (name === ".keep" || name.endsWith(".gz")) continue;
  const b = readFileSync(`${out}/${name}`);
  const z = gzipSync(b, { level: 9 });
  writeFileSync(`${out}/${name}.gz`, z);
  raw += statSync(`${out}/${name}`).size;
  gz += z.length;
  console.log(`${name.padEnd(12)} ${String(b.length).padStart(8)} B  gzip ${String(z.length).padStart(7)} B`);
}
console.log(`${"total".padEnd(12)} ${String(raw).padStart(8)} B  gzip ${String(gz).padStart(7)} B`);
