// latencies(n, gapMs, start): start chain i (start(i, done) resolves when it is added; the chain
// calls done() when its last step returns), n chains gapMs apart, as bench_pg.sh's latency
// section submits tasker's; resolves to { lat_n, p50_ms, p99_ms, max_ms } from each start's
// call to its done().
export async function latencies(n, gapMs, start) {
  const ms = [], all = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    all.push(new Promise((done) => start(i, () => { ms.push(performance.now() - t); done(); })));
    await new Promise((s) => setTimeout(s, gapMs));
  }
  await Promise.all(all);
  ms.sort((x, y) => x - y);
  const at = (p) => +ms[Math.min(n - 1, Math.ceil(p * n) - 1)].toFixed(1);
  return { lat_n: n, p50_ms: at(0.5), p99_ms: at(0.99), max_ms: at(1) };
}
