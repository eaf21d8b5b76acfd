// The page's state and its one render path. Handlers (app.js) and worker replies only call
// set(); set() merges the change and schedules a single render on the next animation frame,
// however many changes arrive before it (tokens stream in faster than frames).
export function createStore(initial, render) {
  const state = {...initial};
  let scheduled = 0;
  function flush() {
    scheduled = 0;
    render(state);
  }
  return {
    state,
    set(patch) {
      Object.assign(state, patch);
      if (!scheduled) scheduled = requestAnimationFrame(flush);
    },
    // Draw now (e.g. before a test reads the DOM right after a reply).
    flush() {
      if (scheduled) cancelAnimationFrame(scheduled);
      flush();
    },
  };
}

// Calls view(element, data) only when one of data's fields changed since the last call with
// that element: views redraw what they were given, so an unchanged input needs no redraw.
const lastInputs = new WeakMap();
export function renderIfChanged(view, element, data) {
  const last = lastInputs.get(element);
  if (last && Object.keys(data).length === Object.keys(last).length &&
      Object.keys(data).every((k) => Object.is(data[k], last[k]))) {
    return;
  }
  lastInputs.set(element, data);
  view(element, data);
}
