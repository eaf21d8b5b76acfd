// Registers the site's service worker (sw.js: cross-origin isolation headers and the offline
// copy of the page) and reloads the page once when that makes it isolated, before the engine's
// worker starts (app.js imports this module first, and this module's top-level await holds it
// back while a reload is coming). `isolationNote` says in plain words why the engine will run
// on one thread, or is '' when the page is cross-origin isolated.

// Set just before the reload, so a page that is still not isolated afterwards does not reload
// again (each load the person asks for gets at most one automatic reload).
const kReloadedKey = 'gpt2-isolation-reload';
// The first visit waits this long for the service worker to start before going on with one
// thread.
const kStartTimeoutMs = 20_000;

const kOneThread = 'The engine runs on one thread: ';

async function setUp() {
  const reloaded = sessionStorage.getItem(kReloadedKey) === '1';
  sessionStorage.removeItem(kReloadedKey);
  if (!window.isSecureContext || !('serviceWorker' in navigator)) {
    return self.crossOriginIsolated ? '' : kOneThread + 'this browser offers no service workers to this page ' +
        '(they need HTTPS or localhost, and a browser that allows them), and the server does not send the ' +
        'cross-origin isolation headers that threads need. It also will not work offline.';
  }
  let registration;
  try {
    registration = await navigator.serviceWorker.register('./sw.js');
  } catch (e) {
    return self.crossOriginIsolated ? '' : kOneThread + `the service worker that enables threads on this ` +
        `host could not be registered (${e?.message || e}). The page will not work offline either.`;
  }
  if (self.crossOriginIsolated) return '';
  if (!registration) {
    // Some browsers (and test harnesses) turn service workers off but keep the API.
    return kOneThread + 'service workers are turned off in this browser, and the server does not send the ' +
        'cross-origin isolation headers that threads need. The page will not work offline either.';
  }
  if (reloaded) {
    return kOneThread + 'the page was reloaded under its service worker but is still not cross-origin ' +
        'isolated (this browser may not allow it here).';
  }
  if (!navigator.serviceWorker.controller && !registration.active) {
    // First visit: sw.js takes over (clients.claim) once it has installed.
    const started = await Promise.race([
      new Promise((resolve) => navigator.serviceWorker.addEventListener('controllerchange', () => resolve(true),
                                                                         {once: true})),
      new Promise((resolve) => setTimeout(() => resolve(false), kStartTimeoutMs)),
    ]);
    if (!started) {
      return kOneThread + 'the service worker that enables threads did not start in time; reload the page ' +
          'to use several threads.';
    }
  }
  // The headers only apply to a document loaded through the service worker.
  sessionStorage.setItem(kReloadedKey, '1');
  location.reload();
  return new Promise(() => {});  // the page is going away
}

export const isolationNote = await setUp().catch((e) =>  // e.g. storage denied to this page
  self.crossOriginIsolated ? '' : kOneThread + `threads could not be set up (${e?.message || e}).`);
