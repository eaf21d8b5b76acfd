#!/usr/bin/env node
// A tiny static file server for build/site (no dependencies), used by the demo and the browser
// tests. Serves Range-less GETs with Content-Length (so the page can show byte-accurate
// progress), the right MIME types (application/wasm lets the browser compile while streaming),
// and optionally the COOP/COEP headers that make the page cross-origin isolated.
//
//   node scripts/serve.mjs [--dir build/site] [--port 8080] [--host 127.0.0.1] [--isolate]
//                          [--mount /prefix=dir ...] [--base /sub/path] [--root-query '?model=...']
// --port 0 picks a free port. Prints "Serving <dir> at <url>" once listening.
// --mount serves another folder under a prefix (the tests serve their model this way); several
// folders under one prefix are searched in the order given (the demo's /weights: the downloaded
// models' folder, then the committed small model's).
// --base serves the site under a sub-path, to check the page uses only relative URLs.
// --root-query redirects the bare site address to it with that query (the demo: the address it
// prints opens the page with its model loaded).
// A GET /__requests?path=P answers how many times P was requested (used by the cache test).
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';

const kTypes = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8',
  '.json': 'application/json', '.wasm': 'application/wasm', '.png': 'image/png',
  '.svg': 'image/svg+xml', '.ico': 'image/x-icon', '.txt': 'text/plain; charset=utf-8',
};

export function startServer({dir = 'build/site', port = 8080, host = '127.0.0.1', isolate = false,
                             mounts = [], base = '/', quiet = false, rootQuery = ''} = {}) {
  const root = path.resolve(dir);
  const prefix = base.endsWith('/') ? base : base + '/';
  const counts = new Map();
  const roots = [...mounts.map(([p, d]) => [p.endsWith('/') ? p : p + '/', path.resolve(d)]),
                 [prefix, root]];
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    let pathname;
    try { pathname = decodeURIComponent(url.pathname); } catch { pathname = url.pathname; }
    if (pathname === '/__requests') {
      res.writeHead(200, {'Content-Type': 'application/json', 'Cache-Control': 'no-store'});
      res.end(JSON.stringify({count: counts.get(url.searchParams.get('path')) || 0}));
      return;
    }
    counts.set(pathname, (counts.get(pathname) || 0) + 1);
    const headers = {'Cache-Control': 'no-cache'};
    if (isolate) {
      headers['Cross-Origin-Opener-Policy'] = 'same-origin';
      headers['Cross-Origin-Embedder-Policy'] = 'require-corp';
      headers['Cross-Origin-Resource-Policy'] = 'same-origin';
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, headers); res.end(); return;
    }
    if (pathname === prefix.slice(0, -1)) {  // "/sub" -> "/sub/"
      res.writeHead(301, {...headers, Location: prefix}); res.end(); return;
    }
    if (rootQuery && pathname === prefix && !url.search) {
      res.writeHead(302, {...headers, Location: prefix + rootQuery}); res.end(); return;
    }
    let file = null;
    for (const [p, d] of roots) {
      if (pathname.startsWith(p)) {
        const candidate = path.join(d, pathname.slice(p.length));
        if (candidate !== d && !candidate.startsWith(d + path.sep)) break;
        file = candidate;
        if (fs.existsSync(file)) break;
      }
    }
    if (file && fs.existsSync(file) && fs.statSync(file).isDirectory()) file = path.join(file, 'index.html');
    if (!file || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      res.writeHead(404, {...headers, 'Content-Type': 'text/plain'});
      res.end('Not found\n');
      return;
    }
    const size = fs.statSync(file).size;
    res.writeHead(200, {...headers, 'Content-Type': kTypes[path.extname(file)] || 'application/octet-stream',
                        'Content-Length': size});
    if (req.method === 'HEAD') { res.end(); return; }
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((resolve, reject) => {
    server.on('error', reject);
    server.listen(port, host, () => {
      const url = `http://${host}:${server.address().port}${prefix}`;
      if (!quiet) console.log(`Serving ${root} at ${url}${isolate ? ' (cross-origin isolated)' : ''}`);
      resolve({server, url, port: server.address().port,
               requests: (p) => counts.get(p) || 0,
               close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(r); })});
    });
  });
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('serve.mjs')) {
  const args = process.argv.slice(2);
  const opts = {mounts: []};
  for (let i = 0; i < args.length; ++i) {
    const a = args[i];
    if (a === '--dir') opts.dir = args[++i];
    else if (a === '--port') opts.port = Number(args[++i]);
    else if (a === '--host') opts.host = args[++i];
    else if (a === '--isolate') opts.isolate = true;
    else if (a === '--base') opts.base = args[++i];
    else if (a === '--root-query') opts.rootQuery = args[++i];
    else if (a === '--mount') { const [p, d] = args[++i].split('='); opts.mounts.push([p, d]); }
    else if (a === '--help' || a === '-h') {
      console.log('usage: node scripts/serve.mjs [--dir D] [--port N] [--host H] [--isolate] [--base /sub] [--mount /p=dir] [--root-query Q]');
      process.exit(0);
    } else { console.error(`serve.mjs: unknown argument ${a}`); process.exit(2); }
  }
  startServer(opts).catch((e) => { console.error(`serve.mjs: ${e.message}`); process.exit(1); });
}
