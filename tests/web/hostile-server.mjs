// A static server for the page under bad conditions (hostile.test.mjs): serves build/site at /
// and a models folder at /models/, and per path can answer an error status, drop the connection
// part-way, serve other bytes than the name says, honour or ignore HTTP Range requests, add a
// Content-Security-Policy, or prepend a line to worker.js (to take the Cache API away from the
// worker, which a test cannot reach from the page). Logs every request with its Range header.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

const kTypes = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8', '.json': 'application/json', '.wasm': 'application/wasm',
  '.svg': 'image/svg+xml',
};

// behaviours: path -> {status, dropAfter (bytes), drops (how many times; default every time),
//                      ranges (answer Range with 206), serve (another file's path),
//                      slow: {chunk (bytes), delayMs}: the body in pieces, a pause after each}
export function startHostileServer({site, models}) {
  const behaviours = new Map();
  const log = [];
  const options = {csp: '', workerPrefix: ''};
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    const p = decodeURIComponent(url.pathname);
    log.push({path: p, range: req.headers.range || null});
    const headers = {'Cache-Control': 'no-cache'};
    if (options.csp) headers['Content-Security-Policy'] = options.csp;
    const b = behaviours.get(p) || {};
    if (b.status) {
      res.writeHead(b.status, {...headers, 'Content-Type': 'text/plain'});
      res.end('The server failed.\n');
      return;
    }
    const file = b.serve || (p.startsWith('/models/') ? path.join(models, p.slice(8))
                                                      : path.join(site, p === '/' ? 'index.html' : p.slice(1)));
    if (!fs.existsSync(file) || !fs.statSync(file).isFile()) {
      res.writeHead(404, {...headers, 'Content-Type': 'text/plain'});
      res.end('Not found\n');
      return;
    }
    let body = fs.readFileSync(file);
    if (p === '/worker/worker.js' && options.workerPrefix) body = Buffer.concat([Buffer.from(options.workerPrefix + '\n'), body]);
    const type = kTypes[path.extname(b.serve ? p : file)] || 'application/octet-stream';
    const etag = `"${body.length}-${Math.floor(fs.statSync(file).mtimeMs)}"`;
    headers.ETag = etag;
    if (b.ranges) headers['Accept-Ranges'] = 'bytes';
    const range = /^bytes=(\d+)-$/.exec(req.headers.range || '');
    const ifRange = req.headers['if-range'];
    if (range && b.ranges && (!ifRange || ifRange === etag) && Number(range[1]) < body.length) {
      const start = Number(range[1]);
      res.writeHead(206, {...headers, 'Content-Type': type, 'Content-Length': body.length - start,
                          'Content-Range': `bytes ${start}-${body.length - 1}/${body.length}`});
      res.end(body.subarray(start));
      return;
    }
    res.writeHead(200, {...headers, 'Content-Type': type, 'Content-Length': body.length});
    if (b.dropAfter !== undefined && (b.drops === undefined || b.drops > 0)) {
      if (b.drops !== undefined) --b.drops;
      res.flushHeaders();
      res.write(body.subarray(0, b.dropAfter), () => setTimeout(() => res.socket.destroy(), 100));
      return;
    }
    if (b.slow) {
      // A slow link, so a test can act (open a second tab, reload) while the download runs.
      let offset = 0;
      const next = () => {
        if (res.destroyed) return;
        if (offset >= body.length) { res.end(); return; }
        res.write(body.subarray(offset, offset + b.slow.chunk));
        offset += b.slow.chunk;
        setTimeout(next, b.slow.delayMs);
      };
      next();
      return;
    }
    res.end(body);
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const origin = `http://127.0.0.1:${server.address().port}`;
      resolve({
        url: origin + '/', origin, log, options,
        behave: (p, b) => behaviours.set(p, b),
        close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }),
      });
    });
  });
}
