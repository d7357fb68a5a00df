// Writes JSONL rows as Parquet files with independent writers, for rlc's Parquet reader tests:
//   node parquet_write.mjs IN.jsonl OUT.parquet WRITER [options] [-- OUT2.parquet WRITER2 [options] ...]
// options: codec=none|snappy|zstd|gzip|lz4_raw|brotli  pages=1|2  dict=1|0  rowgroup=N  pagesize=BYTES  delta=1
//          required=1 (hyparquet: every field REQUIRED, for rows without nulls)
//          maps=COL,... (arrow: these object columns as MAP<string, value> instead of structs)
// WRITER is `arrow` (the npm package parquet-wasm: Apache arrow-rs compiled to WebAssembly, fed Arrow IPC built
// by apache-arrow) or `hyparquet` (the npm package hyparquet-writer; it always writes data pages v2; delta=1
// asks it for DELTA_BYTE_ARRAY strings, DELTA_BINARY_PACKED integers and BYTE_STREAM_SPLIT doubles).
// The schema is inferred from the rows: objects -> structs, arrays -> lists, integers -> INT32 (DOUBLE beyond),
// other numbers -> DOUBLE, strings -> UTF8, booleans -> BOOLEAN; null is allowed everywhere.
import fs from 'node:fs'
import zlib from 'node:zlib'
import { execFileSync } from 'node:child_process'
import { createRequire } from 'node:module'

const argv = process.argv.slice(2)
const inPath = argv.shift()
const jobs = [[]]
for (const a of argv) { if (a === '--') jobs.push([]); else jobs[jobs.length - 1].push(a) }
if (!inPath || jobs.some(j => j.length < 2 || !['arrow', 'hyparquet'].includes(j[1]))) {
  console.error('usage: node parquet_write.mjs IN.jsonl OUT.parquet arrow|hyparquet [options] [-- OUT2.parquet WRITER2 [options] ...]')
  process.exit(2)
}
const rows = fs.readFileSync(inPath, 'utf8').split('\n').filter(l => l.trim()).map(l => JSON.parse(l))

// ---- type inference: {kind: 'string'|'int'|'int64'|'double'|'bool'|'struct'|'list'|'null', fields, elem}
function merge(a, b) {
  if (a.kind === 'null') return b
  if (b.kind === 'null') return a
  if (a.kind === b.kind) {
    if (a.kind === 'struct') {
      const fields = new Map(a.fields)
      for (const [k, t] of b.fields) fields.set(k, fields.has(k) ? merge(fields.get(k), t) : t)
      return { kind: 'struct', fields }
    }
    if (a.kind === 'list') return { kind: 'list', elem: merge(a.elem, b.elem) }
    return a
  }
  const num = new Set(['int', 'int64', 'double'])
  if (num.has(a.kind) && num.has(b.kind)) return { kind: a.kind === 'double' || b.kind === 'double' ? 'double' : 'int64' }
  throw new Error(`mixed types ${a.kind} and ${b.kind}`)
}
function infer(v) {
  if (v === null) return { kind: 'null' }
  if (Array.isArray(v)) return { kind: 'list', elem: v.reduce((t, x) => merge(t, infer(x)), { kind: 'null' }) }
  if (typeof v === 'object') return { kind: 'struct', fields: new Map(Object.entries(v).map(([k, x]) => [k, infer(x)])) }
  if (typeof v === 'string') return { kind: 'string' }
  if (typeof v === 'boolean') return { kind: 'bool' }
  if (Number.isInteger(v)) return { kind: Math.abs(v) < 2 ** 31 ? 'int' : 'int64' }
  return { kind: 'double' }
}
const cols = new Map()
for (const r of rows) for (const [k, v] of Object.entries(r)) cols.set(k, cols.has(k) ? merge(cols.get(k), infer(v)) : infer(v))
const finalize = t => t.kind === 'null' ? { kind: 'string' } : t   // an all-null column is written as strings

const compressions = { none: 'UNCOMPRESSED', snappy: 'SNAPPY', zstd: 'ZSTD', gzip: 'GZIP', lz4_raw: 'LZ4_RAW', brotli: 'BROTLI' }
const require = createRequire(import.meta.url)
const { parquetWriteBuffer } = await import('hyparquet-writer')

for (const [outPath, writer, ...opts] of jobs) {
const o = { codec: 'snappy', pages: '1', dict: '1', rowgroup: '0', pagesize: '0', delta: '0', required: '0', maps: '' }
for (const kv of opts) { const [k, v] = kv.split('='); if (!(k in o)) throw new Error('unknown option ' + k); o[k] = v }
if (!(o.codec in compressions)) throw new Error('unknown codec ' + o.codec)
if (writer === 'arrow') {
  const arrow = require('apache-arrow')
  const pw = require('parquet-wasm/node')
  const toArrow = t => {
    t = finalize(t)
    switch (t.kind) {
    case 'string': return new arrow.Utf8()
    case 'bool': return new arrow.Bool()
    case 'int': return new arrow.Int32()
    case 'int64': return new arrow.Float64()   // JS numbers: exact up to 2^53, as JSON readers keep them
    case 'double': return new arrow.Float64()
    case 'list': return new arrow.List(new arrow.Field('item', toArrow(t.elem), true))
    case 'struct': return new arrow.Struct([...t.fields].map(([k, f]) => new arrow.Field(k, toArrow(f), true)))
    }
  }
  const maps = new Set(o.maps.split(',').filter(x => x))
  const vectors = {}
  for (const [k, t] of cols) {
    if (maps.has(k)) {
      if (t.kind !== 'struct') throw new Error(`maps: column ${k} does not hold objects`)
      const value = [...t.fields.values()].reduce(merge, { kind: 'null' })
      const entry = new arrow.Struct([new arrow.Field('key', new arrow.Utf8(), false), new arrow.Field('value', toArrow(value), true)])
      const data = rows.map(r => r[k] == null ? null : new Map(Object.entries(r[k])))
      vectors[k] = arrow.vectorFromArray(data, new arrow.Map_(new arrow.Field('entries', entry, false)))
    } else {
      vectors[k] = arrow.vectorFromArray(rows.map(r => r[k] ?? null), toArrow(t))
    }
  }
  const table = new arrow.Table(vectors)
  const wasmTable = pw.Table.fromIPCStream(arrow.tableToIPC(table, 'stream'))
  let b = new pw.WriterPropertiesBuilder()
    .setCompression(pw.Compression[compressions[o.codec]])
    .setWriterVersion(o.pages === '2' ? pw.WriterVersion.V2 : pw.WriterVersion.V1)
    .setDictionaryEnabled(o.dict === '1')
  if (+o.rowgroup) b = b.setMaxRowGroupSize(+o.rowgroup)
  if (+o.pagesize) b = b.setDataPageSizeLimit(+o.pagesize).setWriteBatchSize(Math.max(1, Math.min(1024, +o.pagesize >> 4)))
  fs.writeFileSync(outPath, pw.writeParquet(wasmTable, b.build()))
} else {
  // parquet schema elements for a column, depth first
  const elems = (name, t, out) => {
    t = finalize(t)
    const opt = { name, repetition_type: o.required === '1' ? 'REQUIRED' : 'OPTIONAL' }
    switch (t.kind) {
    case 'string': out.push({ ...opt, type: 'BYTE_ARRAY', converted_type: 'UTF8' }); break
    case 'bool': out.push({ ...opt, type: 'BOOLEAN' }); break
    case 'int': out.push({ ...opt, type: 'INT32' }); break
    case 'int64': case 'double': out.push({ ...opt, type: 'DOUBLE' }); break
    case 'list':
      out.push({ ...opt, converted_type: 'LIST', num_children: 1 })
      out.push({ name: 'list', repetition_type: 'REPEATED', num_children: 1 })
      elems('element', t.elem, out)
      break
    case 'struct':
      out.push({ ...opt, num_children: t.fields.size })
      for (const [k, f] of t.fields) elems(k, f, out)
      break
    }
    return out
  }
  const schema = [{ name: 'root', num_children: cols.size }]
  for (const [k, t] of cols) elems(k, t, schema)
  const compressors = {
    GZIP: buf => new Uint8Array(zlib.gzipSync(buf)),
    ZSTD: buf => new Uint8Array(execFileSync('zstd', ['-q', '-c'], { input: buf })),   // node 20's zlib has no zstd
  }
  const columnData = [...cols].map(([k, t]) => {
    const c = { name: k, data: rows.map(r => r[k] ?? null), nullable: o.required !== '1' }
    const leaf = finalize(t).kind
    if (o.dict === '0') c.encoding = 'PLAIN'
    if (o.delta === '1' && leaf === 'string') c.encoding = 'DELTA_BYTE_ARRAY'
    if (o.delta === '1' && leaf === 'int') c.encoding = 'DELTA_BINARY_PACKED'
    if (o.delta === '1' && leaf === 'double') c.encoding = 'BYTE_STREAM_SPLIT'
    return c
  })
  const args = { columnData, schema, codec: compressions[o.codec], compressors }
  if (+o.rowgroup) args.rowGroupSize = +o.rowgroup
  if (+o.pagesize) args.pageSize = +o.pagesize
  fs.writeFileSync(outPath, new Uint8Array(parquetWriteBuffer(args)))
}
}
