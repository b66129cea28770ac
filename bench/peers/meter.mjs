// The server's cost of a measured phase, the same way bench/bench_pg.sh measures tasker's:
// the CPU of the PostgreSQL cluster (the postmaster with its reaped children, and its live
// children: /proc, so it is exact while the peer's connections are still open) and the WAL it
// wrote (the difference of pg_current_wal_lsn(), which does not lag as pg_stat_wal does).
// PGDATA_DIR names the cluster's data directory; without it the CPU is left out (null).
import fs from "node:fs";

const CLK_TCK = 100; // Linux's USER_HZ
function stat(pid) {
  const s = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
  return { ppid: +f[1], own: +f[11] + +f[12], reaped: +f[13] + +f[14] };
}
// serverTicks: the cluster's CPU ticks so far, or NaN when its postmaster is not known.
function serverTicks() {
  try {
    const pm = parseInt(fs.readFileSync(`${process.env.PGDATA_DIR}/postmaster.pid`, "utf8"), 10);
    const p = stat(pm);
    let t = p.own + p.reaped;
    for (const d of fs.readdirSync("/proc")) {
      if (!/^\d+$/.test(d)) continue;
      try { const s = stat(d); if (s.ppid === pm) t += s.own; } catch { /* it exited */ }
    }
    return t;
  } catch { return NaN; }
}
// mark(pool): a reading of the server's CPU and WAL position, for cost().
export async function mark(pool) {
  const r = await pool.query("select (pg_current_wal_lsn() - '0/0')::bigint::text b");
  return { ticks: serverTicks(), wal: BigInt(r.rows[0].b) };
}
// cost(a, b, n): the server's CPU (us) and WAL (bytes) per unit of work between two marks.
export function cost(a, b, n) {
  const us = (b.ticks - a.ticks) * (1e6 / CLK_TCK) / n;
  return { server_us: Number.isFinite(us) ? Math.round(us) : null, wal_bytes: Math.round(Number(b.wal - a.wal) / n) };
}
