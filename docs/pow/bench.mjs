// Calibration of the proof-of-work challenge (docs/design.md, "Proof of
// work"): node docs/pow/bench.mjs [difficulty]. It checks solve.mjs against
// node's native SHA-256, then measures it and Web Crypto in hashes a second
// on challenges as long as the server's (130 characters).
import { solve } from './solve.mjs';
import { createHash, randomBytes, webcrypto } from 'node:crypto';
const d = Number(process.argv[2] || 16);
const challenge = () => randomBytes(64).toString('base64url') + '.' + randomBytes(32).toString('base64url');
const zeroBits = (h) => { let z = 0; for (const b of h) { if (b) return z + Math.clz32(b) - 24; z += 8; } return z; };
let tries = 0, runs = 0, t = performance.now();
while (performance.now() - t < 5000) {
  const c = challenge();
  const [s, n] = solve(c, d);
  if (zeroBits(createHash('sha256').update(c + s).digest()) < d) throw new Error(`wrong solution ${s} for ${c}`);
  tries += n; runs++;
}
let el = (performance.now() - t) / 1000;
console.log(`pure JS: ${(tries / el / 1e6).toFixed(2)} M hashes/s; ${runs} solves at difficulty ${d}, ${(el / runs * 1000).toFixed(0)} ms each on average`);
const enc = new TextEncoder(), c = challenge();
for (const batch of [1, 256]) {
  let n = 0; t = performance.now();
  while (performance.now() - t < 3000) {
    const ps = [];
    for (let i = 0; i < batch; i++) ps.push(webcrypto.subtle.digest('SHA-256', enc.encode(c + (n + i))));
    await Promise.all(ps); n += batch;
  }
  el = (performance.now() - t) / 1000;
  console.log(`Web Crypto, ${batch} digest(s) per await: ${(n / el / 1e6).toFixed(3)} M hashes/s`);
}
