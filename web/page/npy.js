// NumPy's .npy format (version 1.0) for float32 arrays, so exported tensors open with
// numpy.load and line up with TransformerLens's cache: a magic string, a Python-dict header
// padded with spaces to a multiple of 64 bytes and ended by a newline, then the raw
// little-endian data in C order.
export function encodeNpy(shape, data) {
  const dict = `{'descr': '<f4', 'fortran_order': False, 'shape': (${shape.join(', ')}${shape.length === 1 ? ',' : ''}), }`;
  const preamble = 10;  // magic (6) + version (2) + header length (2)
  const total = Math.ceil((preamble + dict.length + 1) / 64) * 64;
  const header = dict.padEnd(total - preamble - 1, ' ') + '\n';
  const out = new Uint8Array(total + data.length * 4);
  out.set([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0], 0);  // \x93NUMPY v1.0
  new DataView(out.buffer).setUint16(8, header.length, true);
  for (let i = 0; i < header.length; ++i) out[preamble + i] = header.charCodeAt(i);
  const body = new DataView(out.buffer, total);
  for (let i = 0; i < data.length; ++i) body.setFloat32(i * 4, data[i], true);
  return out;
}
