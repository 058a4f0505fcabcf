// One process of bench/peers.py for pg-boss: load a burst, or run one worker node.
//
//   node bench/peer_pgboss.js load CONFIG_JSON
//   node bench/peer_pgboss.js node CONFIG_JSON
//   node bench/peer_pgboss.js produce CONFIG_JSON
//
// pg-boss and pg come from bench/.peers/node (bench/peers.py sets NODE_PATH). CONFIG as
// for bench/peer_node.py (dsn parts `host` (the socket folder), `database`, `user`;
// `n`, `first`, `owner`, `stop`), plus `batch` (the worker's batchSize) and `poll` (its
// pollingIntervalSeconds). The job is the same as the other systems': one autocommit
// INSERT INTO bench_results (job, node, due), here through a node-postgres pool.
// `produce` as bench/peer_node.py's: `threads` concurrent producers for `seconds`, at
// `rate` jobs/s in all (0: flat out), `batch` jobs per call: send() for 1, insert() for
// more (pg-boss's bulk API); the producer's instance neither supervises nor schedules.
'use strict'

const fs = require('fs')
const PgBoss = require('pg-boss')
const pg = require('pg')

const QUEUE = 'record'
const CONCURRENCY = 32 // connections for the inserts: as many as the Python nodes' runs

function keys (n) {
  const out = []
  for (let i = 0; i < n; i++) out.push('j' + String(i).padStart(6, '0'))
  return out
}

function connection (config) {
  return { host: config.host, port: config.port, database: config.database, user: config.user }
}

async function load (config) {
  const boss = new PgBoss(connection(config))
  boss.on('error', (err) => console.error(err))
  await boss.start()
  await boss.createQueue(QUEUE)
  if (config.n === 0) {
    await boss.stop({ graceful: true, wait: true })
    return { version: require('pg-boss/package.json').version }
  }
  const startAfter = new Date(config.first * 1000)
  const all = keys(config.n).map((key) => ({ name: QUEUE, data: { key }, startAfter }))
  for (let i = 0; i < all.length; i += 1000) await boss.insert(all.slice(i, i + 1000))
  await boss.stop({ graceful: true, wait: true })
  const version = require('pg-boss/package.json').version
  return { version }
}

function sleep (ms) {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

async function node (config) {
  const results = new pg.Pool({ ...connection(config), max: CONCURRENCY })
  const boss = new PgBoss(connection(config))
  boss.on('error', (err) => console.error(err))
  await boss.start()
  const insert = (job) =>
    results.query('INSERT INTO bench_results (job, node, due) VALUES ($1, $2, $3)',
      [job.data.key, config.owner, job.data.due ?? null])
  await boss.work(QUEUE, { batchSize: config.batch, pollingIntervalSeconds: config.poll }, async (jobs) => {
    await Promise.all(jobs.map(insert))
  })
  const before = process.cpuUsage()
  fs.writeFileSync(`${config.stop}.${config.owner}.ready`, '')
  while (!fs.existsSync(config.stop)) await sleep(50)
  await boss.stop({ graceful: true, wait: true })
  await results.end()
  const spent = process.cpuUsage(before)
  return { owner: config.owner, cpu: (spent.user + spent.system) / 1e6 }
}

async function produce (config) {
  const boss = new PgBoss({ ...connection(config), supervise: false, schedule: false })
  boss.on('error', (err) => console.error(err))
  await boss.start()
  const { threads, batch, seconds, rate } = config
  const step = rate > 0 ? threads * batch / rate * 1000 : 0
  const counts = new Array(threads).fill(0)
  const start = Date.now()
  const end = start + seconds * 1000
  async function one (p) {
    for (let k = 0; ; k++) {
      const at = start + (k + p / threads) * step
      if (k && (at >= end || Date.now() >= end)) return // one call at least
      if (at > Date.now()) await sleep(at - Date.now())
      const due = Date.now() / 1000
      const items = []
      for (let i = 0; i < batch; i++) items.push({ key: `p${p}-${k * batch + i}`, due })
      if (batch === 1) await boss.send(QUEUE, items[0])
      else await boss.insert(items.map((data) => ({ name: QUEUE, data })))
      counts[p] = k + 1
    }
  }
  const all = []
  for (let p = 0; p < threads; p++) all.push(one(p))
  await Promise.all(all)
  const finished = Date.now()
  await boss.stop({ graceful: true, wait: true })
  const calls = counts.reduce((a, b) => a + b, 0)
  return { enqueued: calls * batch, calls, start: start / 1000, end: finished / 1000 }
}

async function main () {
  const [mode, text] = process.argv.slice(2)
  const config = JSON.parse(text)
  const modes = { load, node, produce }
  const out = await modes[mode](config)
  console.log(JSON.stringify(out))
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
