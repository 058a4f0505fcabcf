// One process of bench/peers.py for pg-boss: load a burst, or run one worker node.
//
//   node bench/peer_pgboss.js load CONFIG_JSON
//   node bench/peer_pgboss.js node CONFIG_JSON
//
// pg-boss and pg come from bench/.peers/node (bench/peers.py sets NODE_PATH). CONFIG as
// for bench/peer_node.py (dsn parts `host` (the socket folder), `database`, `user`;
// `n`, `first`, `owner`, `stop`), plus `batch` (the worker's batchSize) and `poll` (its
// pollingIntervalSeconds). The job is the same as the other systems': one autocommit
// INSERT INTO bench_results (job, node), here through a node-postgres pool.
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
    results.query('INSERT INTO bench_results (job, node) VALUES ($1, $2)', [job.data.key, config.owner])
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

async function main () {
  const [mode, text] = process.argv.slice(2)
  const config = JSON.parse(text)
  const out = mode === 'load' ? await load(config) : await node(config)
  console.log(JSON.stringify(out))
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
