// The site's service worker, for static hosts that set no headers (GitHub Pages and the like).
// Two jobs:
// 1. Cross-origin isolation: it adds Cross-Origin-Opener-Policy: same-origin and
//    Cross-Origin-Embedder-Policy: require-corp to the site's own responses (the page, its
//    scripts, the engine's workers), so the browser gives the page SharedArrayBuffer and
//    worker.js runs the threaded engine. require-corp rather than credentialless: the page only
//    loads same-origin files and CORS fetches (models), which require-corp allows, and
//    credentialless is not in Safari. A document's headers count only for the load that
//    received them, so isolation.js reloads the page once after this worker first takes over.
// 2. Offline: the page's own files, as listed in version.json (written by
//    scripts/build-site.sh: {version: content hash, files: [...]}), are kept in one cache per
//    version, "gpt2-site-<version>". A navigation checks version.json on the network first; when
//    it changed (a deploy) the new files are all fetched into a new cache before the page is
//    served from it, and the old caches are deleted. Offline, the cache serves everything.
// Model files are not kept here: worker-load.js stores them in its own Cache API cache
// ("gpt2-models-v1"), which this worker never touches; their requests (like any other file that
// is not the site's) go to the network unchanged but for the isolation headers.

const kSitePrefix = 'gpt2-site-';
// A navigation waits this long for the version check (and, after a deploy, the new files)
// before it is answered from what is cached.
const kUpdateWaitMs = 10_000;
const scope = new URL(self.registration.scope);
const versionUrl = new URL('version.json', scope).href;
const indexUrl = new URL('index.html', scope).href;

self.addEventListener('install', (event) => {
  // Take over at once: the page is waiting to reload itself isolated.
  event.waitUntil(self.skipWaiting());
});

self.addEventListener('activate', (event) => {
  // The page reloads when claimed; its requests wait until activation is done, so they are
  // answered with the cache filled. Filling is best effort (a navigation retries it): threads
  // must not depend on it.
  event.waitUntil(self.clients.claim().then(() => update().catch(() => {})));
});

self.addEventListener('fetch', (event) => {
  const request = event.request;
  if (request.method !== 'GET') return;
  const url = new URL(request.url);
  if (url.origin !== scope.origin || !url.pathname.startsWith(scope.pathname)) return;
  if (request.mode === 'navigate') {
    event.respondWith(navigate(event));
    return;
  }
  event.respondWith(siteFile(request).then((response) => response || fetch(request).then(isolate)));
});

// The page itself: after the version check, from the network (so a server's redirects and
// fresh copy count), else from the cache when offline.
async function navigate(event) {
  const updating = update().catch(() => {});
  event.waitUntil(updating);
  await Promise.race([updating, new Promise((resolve) => setTimeout(resolve, kUpdateWaitMs))]);
  try {
    return isolate(await fetch(event.request));
  } catch (e) {
    const cache = await currentCache();
    const cached = cache && await cache.match(indexUrl);
    if (cached) return isolate(cached);
    throw e;
  }
}

// A file of the site from the current version's cache, or null when it is not one (a model,
// another folder) or nothing is cached yet.
async function siteFile(request) {
  const cache = await currentCache();
  if (!cache) return null;
  const cached = await cache.match(request, {ignoreSearch: true});  // e.g. worker/worker.js?threads=3
  return cached ? isolate(cached) : null;
}

// The same response with the isolation headers. Opaque responses (redirects of a navigation)
// cannot be copied and need none.
function isolate(response) {
  if (response.status === 0) return response;
  const headers = new Headers(response.headers);
  headers.set('Cross-Origin-Opener-Policy', 'same-origin');
  headers.set('Cross-Origin-Embedder-Policy', 'require-corp');
  headers.set('Cross-Origin-Resource-Policy', 'same-origin');
  return new Response(response.body, {status: response.status, statusText: response.statusText, headers});
}

// The cache of the newest complete version. version.json is put last, so a cache that has it
// holds every file (an interrupted fill is not used).
async function currentCache() {
  for (const name of (await caches.keys()).reverse()) {
    if (!name.startsWith(kSitePrefix)) continue;
    const cache = await caches.open(name);
    if (await cache.match(versionUrl)) return cache;
  }
  return null;
}

let pending = null;  // one check at a time; concurrent navigations share it

function update() {
  pending ||= check().finally(() => { pending = null; });
  return pending;
}

async function check() {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), kUpdateWaitMs);
  let response, version;
  try {
    response = await fetch(versionUrl, {cache: 'no-store', signal: abort.signal});
    if (!response.ok) throw new Error(`version.json: ${response.status}`);
    version = await response.clone().json();
  } finally {
    clearTimeout(timer);
  }
  if (typeof version.version !== 'string' || !Array.isArray(version.files)) {
    throw new Error('version.json has no "version" and "files" (not written by scripts/build-site.sh?)');
  }
  const name = kSitePrefix + version.version;
  const old = await currentCache();
  const oldVersion = old && await (await old.match(versionUrl)).json().catch(() => ({}));
  if (oldVersion?.version !== version.version) {
    await fill(name, version.files, response);
  }
  // Every other version's files go; worker.js's model cache has another prefix.
  for (const key of await caches.keys()) {
    if (key.startsWith(kSitePrefix) && key !== name) await caches.delete(key);
  }
}

async function fill(name, files, versionResponse) {
  await caches.delete(name);  // a fill that was interrupted before
  const cache = await caches.open(name);
  // Fetched in full before anything is stored: a deploy that is only half uploaded, or a drop,
  // leaves the previous version in charge.
  const responses = await Promise.all(files.map(async (file) => {
    const url = new URL(file, scope).href;
    const r = await fetch(url, {cache: 'no-store'});
    if (!r.ok) throw new Error(`${file}: ${r.status}`);
    return [url, r];
  }));
  for (const [url, r] of responses) await cache.put(url, r);
  await cache.put(versionUrl, versionResponse);
}
