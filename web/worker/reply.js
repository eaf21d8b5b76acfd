// The one way the worker answers a request that computes on the model: the engine's result
// posted as declared. A result's fields are declared once, as its Shape in
// src/bindings/embind.cc (a plain object of numbers, strings, fresh typed arrays and arrays of
// Shapes); the reply is that object as it is, with `type`, `under` (what it was computed under,
// worker-under.js) and the extras only the page needs (decoded token `pieces`, the model's
// `nLayer`, a time in ms, the request's own fields), and its typed arrays are transferred, not
// copied. protocol.js documents each reply as its Shape's fields plus those extras.

// post(msg, transfer): to the page; type: a Msg value; result: the engine's result, or an object
// of the engine's results under names of the worker's (a reply made of several calls); extras:
// fields of the worker's, which never shadow the result's (one spelling for each field).
export function reply(post, type, under, result, extras = {}) {
  for (const name of Object.keys(extras)) {
    if (Object.hasOwn(result, name)) throw new Error(`reply ${type}: the extra field ${name} would hide the result's`);
  }
  const msg = {type, under, ...result, ...extras};
  post(msg, [...transferable(msg, new Set())]);
}

// {token id: its text} for the distinct ids: a reply's `pieces`.
export function tokenPieces(engine, ids) {
  const d = new TextDecoder('utf-8');
  return Object.fromEntries([...new Set(ids)].map((id) => [id, d.decode(engine.tokenBytes(id))]));
}

// The buffers of the typed arrays in `value` (its fields, the items of its arrays, at any depth)
// that each array holds whole: the engine's fresh copies. A view of wasm memory, a part of a
// buffer or a SharedArrayBuffer is never detached by a transfer; it is copied.
function transferable(value, out) {
  if (ArrayBuffer.isView(value)) {
    const b = value.buffer;
    if (b instanceof ArrayBuffer && value.byteOffset === 0 && value.byteLength === b.byteLength) out.add(b);
  } else if (Array.isArray(value)) {
    for (const item of value) if (item !== null && typeof item === 'object') transferable(item, out);
  } else if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    for (const item of Object.values(value)) if (item !== null && typeof item === 'object') transferable(item, out);
  }
  return out;
}
