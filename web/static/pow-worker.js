// Solves a sale's proof-of-work challenge off the page's thread.
import { solve } from './solve.mjs';

self.onmessage = (e) => {
  const { challenge, difficulty } = e.data;
  const [solution] = solve(challenge, difficulty);
  self.postMessage({ solution });
};
